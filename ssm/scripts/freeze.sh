#!/usr/bin/env bash
# raidsnap freeze: fsfreeze -f a mount point so a multi-volume snapshot set is consistent at the
# filesystem level. A detached guard thaws it after MaxFreezeSeconds whatever happens to the
# caller. Parameters (environment): SSM_MountPoint, SSM_MaxFreezeSeconds, SSM_FreezeToken (the
# caller's name for this freeze: 32 hex digits; one is made when it is empty). The token is kept
# with the guard, and thaw ends a freeze only when given the same token. Optional application
# hooks (lib/hooks.sh): SSM_PreSnapshot runs before the freeze, bounded by SSM_HookSeconds; once
# it started, SSM_PostSnapshot runs exactly once: here if the pre hook or the freeze fails, else
# in thaw, else in the guard (recorded where a reboot keeps it, lib/freeze_guard.sh). The guard's
# MaxFreezeSeconds counts from the freeze, not from the pre hook. SSM_Freeze=false runs the
# hooks without fsfreeze. Freezes given one token (one run's, a mount point each) end before the
# first one: each later one's guard fires before the first one's (lib/freeze_guard.sh,
# group_deadline), and a post hook runs once the others ended (wait_group).
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
# A ready-made hook that holds the database is let go only by its own post phase: owed always.
if holding_builtin "$pre_hook"; then
  if [[ -z $post_hook ]]; then
    post_hook=$pre_hook
  elif [[ $post_hook != "$pre_hook" ]]; then
    fail InvalidInput "PostSnapshot must be $pre_hook (or empty) when PreSnapshot is $pre_hook: only its own post phase releases what it holds"
  fi
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

mkdir -p "$state_dir" "$record_dir"
chmod 0700 "$state_dir" "$record_dir"
state=$(state_file "$mount_point")
owed=$(owed_file "$mount_point")
guard="$state.guard"
hook_key=$(key_of "$mount_point")
lock_state "$state" 30 || fail AlreadyFrozen "$mount_point is being frozen or thawed by another command"
old=$(guard_pid "$state")
if [[ -n $old ]]; then
  fail AlreadyFrozen "$mount_point already has a freeze guard (pid $old); run thaw first"
fi
# The run's first freeze (its token's, on another mount point) ends after this one: this one's
# deadline is capped to group_gap_seconds before it (lib/freeze_guard.sh, group_deadline). Refused
# when less than min_window_seconds would be left (the snapshots could not be taken in time),
# or when the first freeze has ended already.
min_window_seconds=10
# Records of runs long over go (group_deadline ignores them an hour past their deadline).
find "$state_dir" -maxdepth 1 -name 'group-*' -mmin +180 -delete 2>/dev/null || true
group_end=$(group_deadline "$token" "$hook_key") cap=""
if [[ -n $group_end ]]; then
  cap=$((group_end - group_gap_seconds))
  left=$((cap - $(date +%s)))
  if ((left < min_window_seconds)); then
    fail FreezeWindowClosed "$mount_point was not frozen: the first freeze of the same run, on another mount point, is thawed by its guard at $(date -u -d "@$group_end" +%Y-%m-%dT%H:%M:%SZ), and every later freeze ends ${group_gap_seconds}s before it, which leaves ${left}s (at least ${min_window_seconds}s needed); raise MaxFreezeSeconds or take fewer arrays together"
  fi
fi
# capped EPOCH: EPOCH, or the group's cap if earlier.
capped() {
  if [[ -n $cap ]] && (($1 > cap)); then
    printf '%s' "$cap"
  else
    printf '%s' "$1"
  fi
}

# A post hook still owed with no guard left (the instance restarted while a freeze held): run now,
# once the pre hook that owes it ended (its freeze was killed during it; the guard too).
[[ ! -e $owed ]] || wait_pre_hook "$state"
if [[ -e $owed ]] && run_owed_post "$owed"; then
  say "ran the post-snapshot hook a previous freeze of $mount_point still owed: $owed_status"
fi
rm -f "$state" "$state.frozen" "$owed.claimed"
write_guard_program "$guard" "$hook_key"

# The guard starts before the pre hook, in its own session and immune to hangups, so that the
# post hook runs even if this command, the SSM agent or the workflow that called it dies. Its
# deadline bounds the pre hook at first (HookSeconds and timeout's 5 s, then MaxFreezeSeconds);
# once the filesystem is frozen it is MaxFreezeSeconds from the freeze. Values reach it as
# arguments, never as shell text; it does not hold the lock's descriptor.
deadline=$(($(date +%s) + max_seconds))
[[ -z $pre_hook ]] || deadline=$((deadline + hook_seconds + 10))
deadline=$(capped "$deadline")
# shellcheck disable=SC2016 # the single-quoted program is the guard's, expanded by its own bash
setsid nohup bash -c '
  printf "%s %s %s %s\n" "$$" "$2" "$3" "$4" >"$1.tmp" && mv -f "$1.tmp" "$1"
  bash "$5" "$1" "$4" "$6" wait
  rm -f "$1.tmp" # (a last command, so that this bash stays: thaw finds the guard by its name)
' raidsnap-freeze-guard "$state" "$deadline" "$token" "$mount_point" "$guard" "$owed" \
  </dev/null >/dev/null 2>&1 9>&- &
for _ in $(seq 1 50); do
  [[ -s $state ]] && break
  sleep 0.1
done
pid=$(guard_pid "$state")
[[ -n $pid ]] || fail GuardFailed "the thaw guard did not start; $mount_point was not frozen"
timer=$(arm_timer "$mount_point" "$((deadline - $(date +%s)))" "$guard" "$state" "$owed")

# give_up: stop both guards, run the post hook owed (if the pre hook started), then fail.
post_status=none
give_up() {
  kill -TERM -- "-$pid" 2>/dev/null || true
  stop_timer "$mount_point"
  rm -f "$state" "$state.frozen" "$guard"
  if run_owed_post "$owed"; then
    # Reported here; the thaw that follows a failed freeze has nothing left to report.
    rm -f "$owed.done"
    if [[ $owed_status == ok ]]; then post_status=ok; else post_status="failed ($owed_status)"; fi
  fi
}

pre_status=none
if [[ -n $pre_hook ]]; then
  # From here on the post hook must run once, whatever happens: the record says so.
  rm -f "$owed.done"
  if [[ -n $post_hook ]]; then
    printf '%s %s %s\n' "$token" "$hook_seconds" "$post_hook" >"$owed.tmp"
    mv -f "$owed.tmp" "$owed"
    sync -f "$record_dir" 2>/dev/null || true
  fi
  if run_hook pre "$pre_hook" "$hook_seconds" "$state.pre" 9>&-; then
    rm -f "$state.pre"
    pre_status=ok
  else
    rc=$?
    rm -f "$state.pre"
    give_up
    what="failed (exit $rc)"
    ((rc != 124 && rc != 137)) || what="did not finish in ${hook_seconds}s"
    fail HookFailed "the pre-snapshot hook $what; $mount_point was not frozen; post-snapshot hook: $post_status"
  fi
  # Nothing else takes the lock while it is held, but a guard can die (killed, its control group
  # stopped): without it, or without the state and the post hook owed, nothing would end a freeze.
  recorded=""
  [[ ! -r $state ]] || read -r _ _ recorded _ <"$state" || true
  if [[ -z $(guard_pid "$state") || $recorded != "$token" || (-n $post_hook && ! -e $owed) ]]; then
    give_up
    fail GuardFailed "the freeze guard or its record was gone after the pre-snapshot hook; $mount_point was not frozen; post-snapshot hook: $post_status"
  fi
fi

# rearm DEADLINE: the guard's deadline from now on (the state file), capped for a group, and the
# timer's, which fires MaxFreezeSeconds from now, or at the cap.
rearm() {
  deadline=$(capped "$1")
  printf '%s %s %s %s\n' "$pid" "$deadline" "$token" "$mount_point" >"$state.tmp"
  mv -f "$state.tmp" "$state"
  local seconds=$max_seconds
  if ((deadline < $1)); then
    seconds=$((deadline - $(date +%s)))
    ((seconds > 0)) || seconds=1
  fi
  timer=$(arm_timer "$mount_point" "$seconds" "$guard" "$state" "$owed")
}

if [[ $do_freeze != true ]]; then
  begun=$(date +%s)
  rearm "$((begun + max_seconds))"
  [[ -n $group_end ]] || record_group "$token" "$deadline" "$hook_key"
  exec 9>&-
  say "pre-snapshot hook $pre_status; no fsfreeze asked for; the guard runs the post hook by $(date -u -d "@$deadline" +%Y-%m-%dT%H:%M:%SZ) if thaw does not"
  printf '{"ok":true,"mountPoint":%s,"frozen":false,"freezeSeconds":0,"guardPid":%s,"maxFreezeSeconds":%s,"thawDeadline":%s,"systemdTimer":%s,"token":%s,"preSnapshot":%s,"frozenAt":%s}\n' \
    "$(json_str "$mount_point")" "$pid" "$max_seconds" \
    "$(json_str "$(date -u -d "@$deadline" +%Y-%m-%dT%H:%M:%SZ)")" "$(json_str_or_null "$timer")" \
    "$(json_str "$token")" "$(json_str "$pre_status")" "$begun"
  exit 0
fi

# The flag first: a freeze this command made is always one the guard and thaw end. frozenAt
# (begun, epoch seconds on this instance's clock) is taken before fsfreeze -f: the guard's
# deadline counts from it, and so may the caller's.
: >"$state.frozen"
begun=$(date +%s)
start=$(date +%s.%N)
if ! err=$(fsfreeze -f "$mount_point" 2>&1); then
  rm -f "$state.frozen"
  give_up
  if [[ $err == *"Device or resource busy"* ]]; then
    fail AlreadyFrozen "$mount_point is already frozen by someone else: $err"
  fi
  fail FreezeFailed "fsfreeze -f $mount_point failed: $err; post-snapshot hook: $post_status"
fi
rearm "$((begun + max_seconds))"
# A slow fsfreeze -f (it writes the dirty data out first) may end past the run's first freeze:
# thawed at once, never left frozen after the first one's guard let its application go.
if [[ -n $group_end ]] && (($(date +%s) >= deadline)); then
  fsfreeze -u "$mount_point" >/dev/null 2>&1 || true
  rm -f "$state.frozen"
  give_up
  fail FreezeWindowClosed "$mount_point was thawed at once: fsfreeze -f ended past the end of the run's first freeze (its guard at $(date -u -d "@$group_end" +%Y-%m-%dT%H:%M:%SZ)); raise MaxFreezeSeconds or take fewer arrays together"
fi
[[ -n $group_end ]] || record_group "$token" "$deadline" "$hook_key"
exec 9>&-
took=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.3f", e-s}')
say "froze $mount_point in ${took}s; guard pid $pid thaws it by $(date -u -d "@$deadline" +%Y-%m-%dT%H:%M:%SZ)"
printf '{"ok":true,"mountPoint":%s,"frozen":true,"freezeSeconds":%s,"guardPid":%s,"maxFreezeSeconds":%s,"thawDeadline":%s,"systemdTimer":%s,"token":%s,"preSnapshot":%s,"frozenAt":%s}\n' \
  "$(json_str "$mount_point")" "$took" "$pid" "$max_seconds" \
  "$(json_str "$(date -u -d "@$deadline" +%Y-%m-%dT%H:%M:%SZ)")" "$(json_str_or_null "$timer")" \
  "$(json_str "$token")" "$(json_str "$pre_status")" "$begun"
