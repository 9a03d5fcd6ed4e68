#!/usr/bin/env bash
# raidsnap thaw: unfreeze a mount point and stop its guard, but only a freeze made with the same
# token: a freeze someone else holds (another tool, a concurrent backup) is left alone. Safe to
# run any number of times. Parameters (environment): SSM_MountPoint, SSM_FreezeToken (the token
# given to freeze), SSM_MaxFreezeSeconds (accepted, unused), SSM_PostSnapshot and
# SSM_HookSeconds (the post-snapshot hook, run once the filesystem is thawed if the pre hook
# started and nobody ran it yet; a hook that fails fails the thaw, after the thaw).
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
  # (the guard, if it came first, ran any post hook owed)
  printf '{"ok":true,"mountPoint":%s,"mounted":%s,"wasFrozen":false,"guardStopped":false,"postSnapshot":"none"}\n' \
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
# The post hook, once: freeze's marker says the pre hook started; claiming it takes it from the
# guard (stopped above, but it may have claimed it first, and then it ran it).
post_status=none
if [[ -n $post_hook ]] && claim_post "$state.hook"; then
  if run_hook post "$post_hook" "$hook_seconds"; then
    :
  else
    rc=$?
    what="failed (exit $rc)"
    ((rc != 124 && rc != 137)) || what="did not finish in ${hook_seconds}s"
    fail HookFailed "$mount_point is thawed, but the post-snapshot hook $what"
  fi
  post_status=ok
fi
say "thawed $mount_point (was frozen: $was_frozen, guard stopped: $guard_stopped, post-snapshot hook: $post_status)"
printf '{"ok":true,"mountPoint":%s,"mounted":%s,"wasFrozen":%s,"guardStopped":%s,"postSnapshot":%s}\n' \
  "$(json_str "$mount_point")" "$mounted" "$was_frozen" "$guard_stopped" "$(json_str "$post_status")"
