#!/usr/bin/env bash
# raidsnap thaw: unfreeze a mount point and stop its guard, but only a freeze made with the same
# token: a freeze someone else holds (another tool, a concurrent backup) is left alone. Safe to
# run any number of times. Parameters (environment): SSM_MountPoint, SSM_FreezeToken (the token
# given to freeze), SSM_MaxFreezeSeconds (accepted, unused), SSM_PostSnapshot and
# SSM_HookSeconds (accepted and checked; the post-snapshot hook run is the one the freeze with
# this token recorded once its pre hook started, lib/freeze_guard.sh, so it runs even after a
# reboot: once the filesystem is thawed, if nobody ran it yet; a hook that fails fails the thaw,
# after the thaw, and so does one the guard ran and that failed). Only a freeze this token made
# (fsfreeze -f, not a hooks-only Freeze=false) is ever ended with fsfreeze -u.
set -euo pipefail

# shellcheck source=lib/input.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/input.sh"
# shellcheck source=lib/freeze_guard.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/freeze_guard.sh"
# shellcheck source=lib/hooks.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/hooks.sh"

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
post_hook=${SSM_PostSnapshot:-}
hook_seconds=${SSM_HookSeconds-60}
# A hook is an argument vector, never shell text (lib/hooks.sh); the pattern is hook_pattern's.
if [[ -n $post_hook ]]; then
  require_match PostSnapshot "$post_hook" '^(builtin:(postgresql-checkpoint|postgresql-backup|mysql-lock)|(/[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}){1,16}( [A-Za-z0-9_=:,@%+-][A-Za-z0-9._=:,@%+-]{0,99}){0,15})$'
fi
require_match HookSeconds "$hook_seconds" '^[1-9][0-9]{0,2}$'
command -v fsfreeze >/dev/null || fail ToolMissing "fsfreeze (util-linux) is not installed"

# Whose freeze is it? Only a raidsnap guard records a token. Without one, a frozen filesystem
# is someone else's (fsfreeze cannot be asked without thawing), and it is left as it is. The
# lock waits for a freeze still in its pre hook (bounded by its HookSeconds) to finish.
mkdir -p "$state_dir"
chmod 0700 "$state_dir"
state=$(state_file "$mount_point")
owed=$(owed_file "$mount_point")
hook_key=$(key_of "$mount_point")
# The lock file is never removed (lib/freeze_guard.sh) and freeze makes it before anything else:
# without it, and without a post hook owed (kept across a reboot), no freeze of ours ever began
# here since the boot. Said without making the lock file, so a thaw of a mount point raidsnap
# never froze leaves nothing behind.
if [[ ! -e $state.lock && ! -e $owed && ! -e $owed.claimed && ! -e $owed.done ]]; then
  say "no raidsnap freeze guard for $mount_point: nothing of ours to thaw"
  printf '{"ok":true,"mountPoint":%s,"mounted":%s,"wasFrozen":false,"guardStopped":false,"postSnapshot":"none"}\n' \
    "$(json_str "$mount_point")" "$(mountpoint -q "$mount_point" && echo true || echo false)"
  exit 0
fi
lock_state "$state" 1100 || fail ThawFailed "$mount_point is still being frozen or thawed by another command"
recorded=""
if [[ -r $state ]]; then
  read -r _ _ recorded _ <"$state" || true
fi
if [[ -n $recorded && $recorded != "$token" ]]; then
  fail NotOurFreeze "$mount_point is frozen under another token (another backup or tool holds it); not thawed"
fi
owed_by="" done_token="" done_status=""
[[ ! -r $owed ]] || read -r owed_by _ <"$owed" || true
[[ ! -r $owed.done ]] || read -r done_token done_status <"$owed.done" || true
mounted=$(mountpoint -q "$mount_point" && echo true || echo false)
if [[ -z $recorded && $owed_by != "$token" && $done_token != "$token" ]]; then
  say "no raidsnap freeze guard for $mount_point: nothing of ours to thaw"
  printf '{"ok":true,"mountPoint":%s,"mounted":%s,"wasFrozen":false,"guardStopped":false,"postSnapshot":"none"}\n' \
    "$(json_str "$mount_point")" "$mounted"
  exit 0
fi

was_frozen=false guard_stopped=false
if [[ -n $recorded ]]; then
  if $mounted && [[ -e $state.frozen ]]; then
    if err=$(fsfreeze -u "$mount_point" 2>&1); then
      was_frozen=true
    elif [[ $err != *"Invalid argument"* ]]; then
      # EINVAL is "not frozen": a second thaw, or the guard came first. Anything else is real.
      fail ThawFailed "fsfreeze -u $mount_point failed: $err"
    fi
  fi
  pid=$(guard_pid "$state")
  if [[ -n $pid ]]; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    guard_stopped=true
  fi
  rm -f "$state" "$state.frozen"
  stop_timer "$mount_point"
  rm -f "$state.guard"
fi

# The post hook, once: freeze's record says it is owed; claiming it takes it from the guard
# (which may have claimed it first: then its status is in the record's .done). Never while the
# pre hook of a freeze killed during it still runs, nor while another freeze of the same run (its
# token, on another mount point) is in place: the application it lets go may write there. That
# one ends by its thaw or, at the latest, by its guard, whose deadline comes first
# (lib/freeze_guard.sh, wait_group).
post_status=none by=""
[[ $owed_by != "$token" ]] || wait_pre_hook "$state"
if [[ $owed_by == "$token" && -e $owed ]]; then
  waited_from=$(date +%s)
  wait_group "$state" "$token"
  waited=$(($(date +%s) - waited_from))
  ((waited < 1)) || say "waited ${waited}s for the other freezes of this run to end before the post-snapshot hook"
fi
if [[ $owed_by == "$token" ]] && run_owed_post "$owed"; then
  rm -f "$owed.done"
  post_status=$owed_status
elif [[ $done_token == "$token" ]]; then
  rm -f "$owed.done"
  # The guard ran it (at MaxFreezeSeconds): a failure is reported here, as if thaw had run it.
  [[ $done_status == ok ]] || post_status=$done_status by=", run by the freeze guard at MaxFreezeSeconds,"
fi
if [[ $post_status != none && $post_status != ok ]]; then
  what="failed (exit $post_status)"
  ((post_status != 124 && post_status != 137)) || what="did not finish in time"
  fail HookFailed "$mount_point is thawed, but the post-snapshot hook$by $what"
fi
say "thawed $mount_point (was frozen: $was_frozen, guard stopped: $guard_stopped, post-snapshot hook: $post_status)"
printf '{"ok":true,"mountPoint":%s,"mounted":%s,"wasFrozen":%s,"guardStopped":%s,"postSnapshot":%s}\n' \
  "$(json_str "$mount_point")" "$mounted" "$was_frozen" "$guard_stopped" "$(json_str "$post_status")"
