#!/usr/bin/env bash
# raidsnap thaw: unfreeze a mount point and stop its guard, but only a freeze made with the same
# token: a freeze someone else holds (another tool, a concurrent backup) is left alone. Safe to
# run any number of times. Parameters (environment): SSM_MountPoint, SSM_FreezeToken (the token
# given to freeze), SSM_MaxFreezeSeconds (accepted, unused).
set -euo pipefail
export LC_ALL=C
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

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

say() { printf 'raidsnap: %s\n' "$*" >&2; }

# Print the error as the final JSON line and stop. Exit 2 for bad input, 1 otherwise.
fail() {
  local name=$1 message=$2 code=1
  [[ $name == InvalidInput ]] && code=2
  say "$name: $message"
  printf '{"ok":false,"error":%s,"message":%s}\n' "$(json_str "$name")" "$(json_str "$message")"
  exit "$code"
}

# Parameters were checked by the document's allowedPattern already; the script checks again so
# that a hand-run or a copy of the document without the patterns is just as safe.
require_match() { # NAME VALUE REGEX
  [[ $2 =~ $3 ]] || fail InvalidInput "$1 has an invalid value (expected ${3})"
}

require_mount_point() { # NAME VALUE
  local seg
  local -a segs
  require_match "$1" "$2" '^(/[A-Za-z0-9._-]+)+$'
  ((${#2} <= 201)) || fail InvalidInput "$1 is longer than 201 characters"
  IFS=/ read -r -a segs <<<"${2#/}"
  for seg in "${segs[@]}"; do
    [[ $seg != . && $seg != .. ]] || fail InvalidInput "$1 must not contain . or .. segments"
  done
}

state_dir=/run/raidsnap

# The state file of the guard for a mount point: "<pid> <deadline epoch> <token> <mount point>".
state_file() {
  printf '%s/freeze-%s\n' "$state_dir" "$(printf '%s' "$1" | sha256sum | cut -c1-16)"
}

timer_unit() {
  printf 'raidsnap-thaw-%s\n' "$(printf '%s' "$1" | sha256sum | cut -c1-16)"
}

# The pid of the guard recorded in $1 if that process is still a guard, else nothing.
guard_pid() {
  local pid="" cmdline
  [[ -r $1 ]] || return 0
  read -r pid _ <"$1" || true
  [[ $pid =~ ^[0-9]+$ ]] || return 0
  cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
  if [[ $cmdline == *raidsnap-freeze-guard* ]]; then
    printf '%s\n' "$pid"
  fi
  return 0
}

have_systemd() {
  [[ -d /run/systemd/system ]] && command -v systemd-run >/dev/null && command -v systemctl >/dev/null
}

# No system-directory rule here, unlike freeze: a thaw must always be able to end a freeze, and
# all it does to MountPoint is fsfreeze -u, which cannot hide, replace or write anything.
mount_point=${SSM_MountPoint:-}
token=${SSM_FreezeToken:-}
require_mount_point MountPoint "$mount_point"
require_match FreezeToken "$token" '^[0-9a-f]{32}$'
# MaxFreezeSeconds means nothing to a thaw; it is accepted so one parameter set fits both.
if [[ -n ${SSM_MaxFreezeSeconds:-} ]]; then
  require_match MaxFreezeSeconds "$SSM_MaxFreezeSeconds" '^[1-9][0-9]{0,3}$'
fi
command -v fsfreeze >/dev/null || fail ToolMissing "fsfreeze (util-linux) is not installed"

# Whose freeze is it? Only a raidsnap guard records a token. Without one, a frozen filesystem
# is someone else's (fsfreeze cannot be asked without thawing), and it is left as it is.
state=$(state_file "$mount_point")
recorded=""
if [[ -r $state ]]; then
  read -r _ _ recorded _ <"$state" || true
fi
if [[ -n $recorded && $recorded != "$token" ]]; then
  fail NotOurFreeze "$mount_point is frozen under another token (another backup or tool holds it); not thawed"
fi
if [[ -z $recorded ]]; then
  say "no raidsnap freeze guard for $mount_point: nothing of ours to thaw"
  printf '{"ok":true,"mountPoint":%s,"mounted":%s,"wasFrozen":false,"guardStopped":false}\n' \
    "$(json_str "$mount_point")" "$(mountpoint -q "$mount_point" && echo true || echo false)"
  exit 0
fi

was_frozen=false mounted=false
if mountpoint -q "$mount_point"; then
  mounted=true
  if err=$(fsfreeze -u "$mount_point" 2>&1); then
    was_frozen=true
  elif [[ $err != *"Invalid argument"* ]]; then
    # EINVAL is "not frozen": a second thaw, or the guard came first. Anything else is real.
    fail ThawFailed "fsfreeze -u $mount_point failed: $err"
  fi
fi

guard_stopped=false
pid=$(guard_pid "$state")
if [[ -n $pid ]]; then
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  guard_stopped=true
fi
rm -f "$state"
if have_systemd; then
  systemctl stop "$(timer_unit "$mount_point").timer" >/dev/null 2>&1 || true
fi
say "thawed $mount_point (was frozen: $was_frozen, guard stopped: $guard_stopped)"
printf '{"ok":true,"mountPoint":%s,"mounted":%s,"wasFrozen":%s,"guardStopped":%s}\n' \
  "$(json_str "$mount_point")" "$mounted" "$was_frozen" "$guard_stopped"
