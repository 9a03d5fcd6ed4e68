# shellcheck shell=bash
# shellcheck source=json.sh
source "$(dirname "${BASH_SOURCE[0]}")/json.sh"

# lib/base.sh: what every script runs with, and how it reports: progress on stderr, a failure as
# its last stdout line.

# The C locale, so that ranges, sort and tr work on bytes; a PATH of its own, whatever the agent's.
export LC_ALL=C
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() { printf 'raidsnap: %s\n' "$*" >&2; }

# Print the error as the final JSON line and stop. Exit 2 for bad input, 1 otherwise. A script
# that undoes what it made when it fails defines undo_ours, which does so and prints what it
# undid (added to the message). failing tells the script's own EXIT trap, if it has one, that
# the error has been reported already.
fail() {
  local name=$1 message=$2 code=1 undone=""
  [[ $name == InvalidInput ]] && code=2
  # shellcheck disable=SC2034 # read by the EXIT trap of a script that has one
  failing=true
  if declare -F undo_ours >/dev/null; then undone=$(undo_ours); fi
  [[ -z $undone ]] || message+=" (undone: $undone)"
  say "$name: $message"
  printf '{"ok":false,"error":%s,"message":%s}\n' "$(json_str "$name")" "$(json_str "$message")"
  exit "$code"
}
