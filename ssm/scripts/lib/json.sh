# shellcheck shell=bash
# lib/json.sh: JSON literals for the scripts' one-line results.

# JSON string literal for $1: backslash, quote and control characters escaped. Pure bash,
# because jq or python may be absent on the instance.
json_str() {
  local s=$1 out="" c i
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\r'/\\r}
  s=${s//$'\t'/\\t}
  if [[ $s == *[$'\x01'-$'\x1f']* ]]; then
    for ((i = 0; i < ${#s}; i++)); do
      c=${s:i:1}
      [[ $c == [$'\x01'-$'\x1f'] ]] && printf -v c '\\u%04x' "'$c"
      out+=$c
    done
    s=$out
  fi
  printf '"%s"' "$s"
}

# A JSON string, or null when $1 is empty.
json_str_or_null() {
  if [[ -n $1 ]]; then json_str "$1"; else printf 'null'; fi
}

# A JSON number, or null when $1 is not an integer.
json_int_or_null() {
  if [[ $1 =~ ^-?[0-9]+$ ]]; then printf '%s' "$1"; else printf 'null'; fi
}
