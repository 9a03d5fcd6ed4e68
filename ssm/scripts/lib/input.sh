# shellcheck shell=bash
# shellcheck source=base.sh
source "$(dirname "${BASH_SOURCE[0]}")/base.sh"

# lib/input.sh: the scripts' own checks of their parameters.

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
