#!/usr/bin/env bash
# raidsnap freeze: fsfreeze -f a mount point so a multi-volume snapshot set is consistent at the
# filesystem level. A detached guard thaws it after MaxFreezeSeconds whatever happens to the
# caller. Parameters (environment): SSM_MountPoint, SSM_MaxFreezeSeconds, SSM_FreezeToken (the
# caller's name for this freeze: 32 hex digits; one is made when it is empty). The token is kept
# with the guard, and thaw ends a freeze only when given the same token. Optional application
# hooks (lib/hooks.sh): SSM_PreSnapshot runs before the freeze, bounded by SSM_HookSeconds; once
# it started, SSM_PostSnapshot runs exactly once: here if the pre hook or the freeze fails, else
# in thaw, else in the guard. SSM_Freeze=false runs the hooks without fsfreeze.
set -euo pipefail

# shellcheck source=lib/system_directory.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/system_directory.sh"
# shellcheck source=lib/freeze_guard.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/freeze_guard.sh"
# shellcheck source=lib/hooks.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/hooks.sh"

mount_point=${SSM_MountPoint:-}
max_seconds=${SSM_MaxFreezeSeconds:-}
token=${SSM_FreezeToken:-}
pre_hook=${SSM_PreSnapshot:-}
post_hook=${SSM_PostSnapshot:-}
hook_seconds=${SSM_HookSeconds-60}
do_freeze=${SSM_Freeze-true}
require_mount_point MountPoint "$mount_point"
require_not_system_directory MountPoint "$mount_point"
require_match MaxFreezeSeconds "$max_seconds" '^[1-9][0-9]{0,3}$'
if [[ -n $token ]]; then
  require_match FreezeToken "$token" '^[0-9a-f]{32}$'
else
  token=$(tr -d -- '-\n' </proc/sys/kernel/random/uuid)
fi
# A hook is an argument vector, never shell text (lib/hooks.sh); the pattern is hook_pattern's.
if [[ -n $pre_hook ]]; then
  require_match PreSnapshot "$pre_hook" '^(builtin:(postgresql-checkpoint|postgresql-backup|mysql-lock)|(/[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}){1,16}( [A-Za-z0-9_=:,@%+-][A-Za-z0-9._=:,@%+-]{0,99}){0,15})$'
fi
if [[ -n $post_hook ]]; then
  require_match PostSnapshot "$post_hook" '^(builtin:(postgresql-checkpoint|postgresql-backup|mysql-lock)|(/[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}){1,16}( [A-Za-z0-9_=:,@%+-][A-Za-z0-9._=:,@%+-]{0,99}){0,15})$'
fi
require_match HookSeconds "$hook_seconds" '^[1-9][0-9]{0,2}$'
require_match Freeze "$do_freeze" '^(true|false)$'
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
rm -f "$state" "$state.hook" "$state.hook.claimed"

# The guard starts before the freeze, in its own session and immune to hangups, so the
# filesystem is thawed after MaxFreezeSeconds even if this command, the SSM agent or the
# workflow that called it dies; it then runs the post hook too if nobody ran it yet. Values
# reach it as arguments, never as shell text (the hook functions as exported functions).
deadline=$(($(date +%s) + max_seconds))
export -f run_hook raidsnap_builtin_hook raidsnap_held_session claim_post
export hook_dir
# shellcheck disable=SC2016 # the single-quoted program is the guard's, expanded by its own bash
setsid nohup bash -c '
  printf "%s %s %s %s\n" "$$" "$2" "$5" "$3" >"$4.tmp" && mv -f "$4.tmp" "$4"
  sleep "$1"
  [[ $7 != true ]] || fsfreeze -u "$3" >/dev/null 2>&1 || true
  if [[ -n $6 ]] && claim_post "$4.hook"; then run_hook post "$6" "$8" 2>/dev/null || true; fi
  rm -f "$4"
' raidsnap-freeze-guard "$max_seconds" "$deadline" "$mount_point" "$state" "$token" \
  "$post_hook" "$do_freeze" "$hook_seconds" </dev/null >/dev/null 2>&1 &

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

# give_up: stop both guards (after the post hook, if pre started) before failing.
give_up() {
  run_post_here
  kill -TERM -- "-$pid" 2>/dev/null || true
  rm -f "$state"
  [[ -z $timer ]] || systemctl stop "$timer" >/dev/null 2>&1 || true
}
post_status=none
run_post_here() {
  if [[ -n $post_hook ]] && claim_post "$state.hook"; then
    if run_hook post "$post_hook" "$hook_seconds"; then post_status=ok; else post_status="failed ($?)"; fi
  fi
}

pre_status=none
if [[ -n $pre_hook ]]; then
  # From here on the post hook must run once, whatever happens: the marker says so.
  : >"$state.hook"
  if run_hook pre "$pre_hook" "$hook_seconds"; then
    pre_status=ok
  else
    rc=$?
    give_up
    what="failed (exit $rc)"
    ((rc != 124 && rc != 137)) || what="did not finish in ${hook_seconds}s"
    fail HookFailed "the pre-snapshot hook $what; $mount_point was not frozen; post-snapshot hook: $post_status"
  fi
fi

if [[ $do_freeze != true ]]; then
  say "pre-snapshot hook $pre_status; no fsfreeze asked for; the guard runs the post hook by $(date -u -d "@$deadline" +%Y-%m-%dT%H:%M:%SZ) if thaw does not"
  printf '{"ok":true,"mountPoint":%s,"frozen":false,"freezeSeconds":0,"guardPid":%s,"maxFreezeSeconds":%s,"thawDeadline":%s,"systemdTimer":%s,"token":%s,"preSnapshot":%s}\n' \
    "$(json_str "$mount_point")" "$pid" "$max_seconds" \
    "$(json_str "$(date -u -d "@$deadline" +%Y-%m-%dT%H:%M:%SZ)")" "$(json_str_or_null "$timer")" \
    "$(json_str "$token")" "$(json_str "$pre_status")"
  exit 0
fi

start=$(date +%s.%N)
if ! err=$(fsfreeze -f "$mount_point" 2>&1); then
  give_up
  if [[ $err == *"Device or resource busy"* ]]; then
    fail AlreadyFrozen "$mount_point is already frozen by someone else: $err"
  fi
  fail FreezeFailed "fsfreeze -f $mount_point failed: $err"
fi
took=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.3f", e-s}')
say "froze $mount_point in ${took}s; guard pid $pid thaws it by $(date -u -d "@$deadline" +%Y-%m-%dT%H:%M:%SZ)"
printf '{"ok":true,"mountPoint":%s,"frozen":true,"freezeSeconds":%s,"guardPid":%s,"maxFreezeSeconds":%s,"thawDeadline":%s,"systemdTimer":%s,"token":%s,"preSnapshot":%s}\n' \
  "$(json_str "$mount_point")" "$took" "$pid" "$max_seconds" \
  "$(json_str "$(date -u -d "@$deadline" +%Y-%m-%dT%H:%M:%SZ)")" "$(json_str_or_null "$timer")" \
  "$(json_str "$token")" "$(json_str "$pre_status")"
