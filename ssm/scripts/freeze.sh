#!/usr/bin/env bash
# raidsnap freeze: fsfreeze -f a mount point so a multi-volume snapshot set is consistent at the
# filesystem level. A detached guard thaws it after MaxFreezeSeconds whatever happens to the
# caller. Parameters (environment): SSM_MountPoint, SSM_MaxFreezeSeconds, SSM_FreezeToken (the
# caller's name for this freeze: 32 hex digits; one is made when it is empty). The token is kept
# with the guard, and thaw ends a freeze only when given the same token.
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

# Where a restored filesystem is never mounted: "/", these system trees and everything under
# them, and these directories themselves (over a whole /var or /home everything in it would be
# hidden; /var/lib/postgresql, /srv/db or /mnt/md0 are fine). The same rule as the restore
# workflow's (raidsnap.models.system_directory), repeated because this script stands alone.
system_trees=(/bin /boot /dev /etc /lib /lib32 /lib64 /libx32 /proc /root /run /sbin /sys /usr
  /tmp /var/tmp /var/run /var/lock /var/spool /var/log)
system_dirs=(/var /home /opt /srv /mnt /media)

# The system directory that the normalized absolute path $1 is or lies under, else nothing.
system_directory() {
  local d
  if [[ $1 == / ]]; then printf '/\n'; return 0; fi
  for d in "${system_trees[@]}"; do
    if [[ $1 == "$d" || $1 == "$d"/* ]]; then printf '%s\n' "$d"; return 0; fi
  done
  for d in "${system_dirs[@]}"; do
    if [[ $1 == "$d" ]]; then printf '%s\n' "$d"; return 0; fi
  done
  return 0
}

# The rule on the value itself (after require_mount_point: a normalized absolute path).
require_not_system_directory() { # NAME VALUE
  local found
  found=$(system_directory "$2")
  [[ -z $found ]] ||
    fail InvalidInput "$1 $2 is or lies under the system directory $found; a filesystem is never mounted over a system directory, whose files it would hide or replace"
}

# The rule on the path the kernel would use: the value with its symbolic links resolved, so that
# /mnt/x -> /etc is refused as /etc is.
require_resolved_not_system_directory() { # NAME VALUE
  local found real
  real=$(readlink -m -- "$2" 2>/dev/null) || fail InvalidInput "$1 $2 cannot be resolved (a symbolic link loop?)"
  [[ $real == "$2" ]] && return 0
  found=$(system_directory "$real")
  [[ -z $found ]] ||
    fail InvalidInput "$1 $2 leads through a symbolic link to $real, which is or lies under the system directory $found"
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

mount_point=${SSM_MountPoint:-}
max_seconds=${SSM_MaxFreezeSeconds:-}
token=${SSM_FreezeToken:-}
require_mount_point MountPoint "$mount_point"
require_not_system_directory MountPoint "$mount_point"
require_match MaxFreezeSeconds "$max_seconds" '^[1-9][0-9]{0,3}$'
if [[ -n $token ]]; then
  require_match FreezeToken "$token" '^[0-9a-f]{32}$'
else
  token=$(tr -d -- '-\n' </proc/sys/kernel/random/uuid)
fi
require_resolved_not_system_directory MountPoint "$mount_point"
command -v fsfreeze >/dev/null || fail ToolMissing "fsfreeze (util-linux) is not installed"
mountpoint -q "$mount_point" || fail NotMounted "$mount_point is not a mount point"
# Freezing the root filesystem would stall this agent, its logs and the guard itself.
if [[ $(findmnt -rn -o MAJ:MIN --mountpoint "$mount_point") == "$(findmnt -rn -o MAJ:MIN --mountpoint /)" ]]; then
  fail InvalidInput "refusing to freeze $mount_point: it is the root filesystem"
fi

mkdir -p "$state_dir"
chmod 0700 "$state_dir"
state=$(state_file "$mount_point")
old=$(guard_pid "$state")
if [[ -n $old ]]; then
  fail AlreadyFrozen "$mount_point already has a freeze guard (pid $old); run thaw first"
fi
rm -f "$state"

# The guard starts before the freeze, in its own session and immune to hangups, so the
# filesystem is thawed after MaxFreezeSeconds even if this command, the SSM agent or the
# workflow that called it dies. Values reach it as arguments, never as shell text.
deadline=$(($(date +%s) + max_seconds))
# shellcheck disable=SC2016 # the single-quoted program is the guard's, expanded by its own bash
setsid nohup bash -c '
  printf "%s %s %s %s\n" "$$" "$2" "$5" "$3" >"$4.tmp" && mv -f "$4.tmp" "$4"
  sleep "$1"
  fsfreeze -u "$3" >/dev/null 2>&1 || true
  rm -f "$4"
' raidsnap-freeze-guard "$max_seconds" "$deadline" "$mount_point" "$state" "$token" </dev/null >/dev/null 2>&1 &

for _ in $(seq 1 50); do
  [[ -s $state ]] && break
  sleep 0.1
done
pid=$(guard_pid "$state")
[[ -n $pid ]] || fail GuardFailed "the thaw guard did not start; $mount_point was not frozen"

# Where systemd runs, a transient timer is a second guard that also survives a restart of the
# agent's service (which would kill everything in its control group).
timer=""
if have_systemd; then
  unit=$(timer_unit "$mount_point")
  systemctl stop "$unit.timer" >/dev/null 2>&1 || true
  systemctl reset-failed "$unit.service" "$unit.timer" >/dev/null 2>&1 || true
  if systemd-run --quiet --unit="$unit" --on-active="${max_seconds}s" --timer-property=AccuracySec=1s \
      "$(command -v fsfreeze)" -u "$mount_point" >/dev/null 2>&1; then
    timer="$unit.timer"
  else
    say "warning: could not add the systemd timer guard; the process guard remains"
  fi
fi

start=$(date +%s.%N)
if ! err=$(fsfreeze -f "$mount_point" 2>&1); then
  kill -TERM -- "-$pid" 2>/dev/null || true
  rm -f "$state"
  [[ -n $timer ]] && systemctl stop "$timer" >/dev/null 2>&1
  if [[ $err == *"Device or resource busy"* ]]; then
    fail AlreadyFrozen "$mount_point is already frozen by someone else: $err"
  fi
  fail FreezeFailed "fsfreeze -f $mount_point failed: $err"
fi
took=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.3f", e-s}')
say "froze $mount_point in ${took}s; guard pid $pid thaws it by $(date -u -d "@$deadline" +%Y-%m-%dT%H:%M:%SZ)"
printf '{"ok":true,"mountPoint":%s,"frozen":true,"freezeSeconds":%s,"guardPid":%s,"maxFreezeSeconds":%s,"thawDeadline":%s,"systemdTimer":%s,"token":%s}\n' \
  "$(json_str "$mount_point")" "$took" "$pid" "$max_seconds" \
  "$(json_str "$(date -u -d "@$deadline" +%Y-%m-%dT%H:%M:%SZ)")" "$(json_str_or_null "$timer")" \
  "$(json_str "$token")"
