#!/usr/bin/env bash
# raidsnap freeze: fsfreeze -f a mount point so a multi-volume snapshot set is consistent at the
# filesystem level. A detached guard thaws it after MaxFreezeSeconds whatever happens to the
# caller. Parameters (environment): SSM_MountPoint, SSM_MaxFreezeSeconds, SSM_FreezeToken (the
# caller's name for this freeze: 32 hex digits; one is made when it is empty). The token is kept
# with the guard, and thaw ends a freeze only when given the same token.
set -euo pipefail

# shellcheck source=lib/system_directory.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/system_directory.sh"
# shellcheck source=lib/freeze_guard.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/freeze_guard.sh"

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
