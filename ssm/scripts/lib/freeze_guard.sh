# shellcheck shell=bash
# lib/freeze_guard.sh: the guard that freeze leaves to thaw a mount point in time, and the record
# of the post-snapshot hook a freeze owes.
#
# Per mount point (its key, key_of): in state_dir (a tmpfs: gone after a reboot, as is any
# freeze) the guard's state file "<pid> <deadline epoch> <token> <mount point>", a "frozen" flag
# written before fsfreeze -f (so only a freeze of ours is ever thawed), a lock file and the guard
# program; in record_dir (kept across a reboot, root-only) the post hook owed once the pre hook
# started, "<token> <seconds> <hook>", and the status of a post hook the guard ran,
# "<token> <status>", for the thaw to report.
#
# The lock (flock on <state>.lock) is held by freeze from before its pre hook until the
# filesystem is frozen and the guard's deadline set to MaxFreezeSeconds from then, by thaw for
# all it does, and by the guard when it fires: none of them sees another's half-done work. The
# lock file is never removed: a holder that unlinked it would leave the next opener locking a
# file of its own while a waiter holds the old one.
#
# A pre hook outlives a freeze killed while it runs (lib/hooks.sh, run_hook): "<state>.pre"
# names it, and whoever runs the post hook waits for it to end first (wait_pre_hook).

state_dir=/run/raidsnap
record_dir=/var/lib/raidsnap

key_of() {
  printf '%s' "$1" | sha256sum | cut -c1-16
}

state_file() {
  printf '%s/freeze-%s\n' "$state_dir" "$(key_of "$1")"
}

owed_file() {
  printf '%s/post-%s\n' "$record_dir" "$(key_of "$1")"
}

timer_unit() {
  printf 'raidsnap-thaw-%s\n' "$(key_of "$1")"
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

# lock_state STATE SECONDS: take the mount point's lock on fd 9 (waiting up to SECONDS).
lock_state() {
  exec 9>>"$1.lock"
  flock -w "$2" 9
}

# pre_hook_running PID START: true while PID is the process that started at START (clock ticks
# after boot, /proc/PID/stat's 22nd field) and has not ended (a zombie has).
pre_hook_running() {
  local s
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  local -a f
  read -r -a f <<<"${s##*) }"
  [[ ${f[0]} != Z && ${f[19]} == "$2" ]]
}

# wait_pre_hook STATE: the post hook never starts while the pre hook recorded in STATE.pre still
# runs (its freeze was killed during it). It is waited for until its own bound (its seconds,
# timeout's 5 s to SIGKILL and a margin: timeout(1) lives on and enforces it), then killed with
# its process group (timeout's own).
wait_pre_hook() {
  local file=$1.pre pid="" start="" seconds=0 began=0
  [[ -r $file ]] || return 0
  read -r pid start seconds began <"$file" || true
  if [[ $pid =~ ^[0-9]+$ && $seconds =~ ^[0-9]+$ && $began =~ ^[0-9]+$ ]]; then
    while pre_hook_running "$pid" "$start"; do
      if (($(date +%s) > began + seconds + 10)); then
        kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      fi
      sleep 0.1
    done
  fi
  rm -f "$file"
}

# The freezes of one run share its token, one per mount point (a backup that takes several
# arrays at one point in time). Each later one ends group_gap_seconds before the first one, the
# one frozen longest (whose freeze ran the pre hook, if any): its deadline is at most the latest
# of theirs less the gap, so every other guard of the run fires before the first one's, and the
# first mount point is thawed, and its post hook run, last.
# shellcheck disable=SC2034 # freeze.sh's, which caps its deadline with it
group_gap_seconds=2

# The run's record of its first freeze, per token, in state_dir: "<deadline> <mount point key>",
# written by the first freeze of the run once it froze, read by the next ones. It outlives the
# freeze itself (a guard that fires removes its state file), so a freeze of the run that comes
# after the first one ended is refused, not left uncapped. A freeze of the record's own mount
# point with its token (the same freeze again: a retried or redriven step, a hand run) starts
# the sequence anew instead.
group_file() {
  printf '%s/group-%s\n' "$state_dir" "$1"
}

# group_deadline TOKEN KEY: the recorded deadline of the run's first freeze (epoch seconds), if
# it froze another mount point than the one KEY names; nothing if none, or if it is more than an
# hour past (a run's freezes all come well within that: a freeze command's time limit is under
# an hour).
group_deadline() {
  local file deadline="" first=""
  file=$(group_file "$1")
  [[ -r $file ]] || return 0
  read -r deadline first <"$file" 2>/dev/null || return 0
  [[ $deadline =~ ^[0-9]+$ && $first != "$2" ]] || return 0
  (($(date +%s) < deadline + 3600)) || return 0
  printf '%s' "$deadline"
}

# record_group TOKEN DEADLINE KEY: this freeze (of the mount point KEY names) is the run's first.
record_group() {
  local file
  file=$(group_file "$1")
  printf '%s %s\n' "$2" "$3" >"$file.tmp"
  mv -f "$file.tmp" "$file"
}

# wait_group STATE TOKEN: the post hook runs once every other freeze made with TOKEN has ended
# (thawed by its thaw, or by its guard: the application it releases may write to any of them).
# Each is waited for until its own deadline and a margin: its guard has fired by then. A state
# file more than 5 s past its deadline has no guard left (it was killed) and is not waited for.
wait_group() {
  local own=$1 token=$2 file deadline said waiting
  while :; do
    waiting=""
    for file in "$state_dir"/freeze-????????????????; do
      [[ -e $file && $file != "$own" ]] || continue
      read -r _ deadline said _ <"$file" 2>/dev/null || continue
      [[ $said == "$token" && $deadline =~ ^[0-9]+$ ]] || continue
      if (($(date +%s) < deadline + 5)); then
        waiting=$file
      fi
    done
    [[ -n $waiting ]] || return 0
    sleep 0.2
  done
}

# run_owed_post OWED: if a post hook is owed (OWED exists), claim it (exactly one caller does),
# run it and record its status in OWED.done ("<token> ok" or "<token> <exit status>"). Sets
# owed_status and owed_token; false if nothing was owed.
run_owed_post() {
  local owed=$1 seconds hook
  owed_status="" owed_token=""
  mv -f -T "$owed" "$owed.claimed" 2>/dev/null || return 1
  read -r owed_token seconds hook <"$owed.claimed" || true
  if run_hook post "$hook" "$seconds" 9>&-; then owed_status=ok; else owed_status=$?; fi
  printf '%s %s\n' "$owed_token" "$owed_status" >"$owed.done.tmp"
  mv -f "$owed.done.tmp" "$owed.done"
  rm -f "$owed.claimed"
  sync -f "$record_dir" 2>/dev/null || true
}

# The guard itself. The process guard (WHEN "wait") waits for the deadline in STATE (freeze moves
# it once the filesystem is frozen); the systemd timer's unit (WHEN "now") runs when the timer
# fires, which freeze arms for the same deadline. Then, holding the lock and if the state is
# still there (a thaw came first otherwise), it thaws (only a freeze of ours), drops the state
# and runs the post hook owed, once the run's other freezes ended (wait_group). Arguments: STATE
# MOUNT_POINT OWED WHEN. Both guards run it as a program of its own, written by
# write_guard_program.
# shellcheck disable=SC2329 # called by the program write_guard_program writes
raidsnap_guard() {
  local state=$1 mount_point=$2 owed=$3 when=$4 deadline token
  exec 9>>"$state.lock"
  while [[ -e $state ]]; do
    deadline=0
    [[ $when == now ]] || read -r _ deadline _ <"$state" 2>/dev/null || deadline=0
    if (($(date +%s) >= deadline)); then
      flock 9
      [[ -e $state ]] || return 0
      [[ $when == now ]] || read -r _ deadline _ <"$state" 2>/dev/null || deadline=0
      if (($(date +%s) >= deadline)); then
        [[ ! -e $state.frozen ]] || fsfreeze -u "$mount_point" >/dev/null 2>&1 || true
        token=""
        read -r _ _ token _ <"$state" 2>/dev/null || token=""
        rm -f "$state" "$state.frozen"
        wait_pre_hook "$state"
        [[ -z $token || ! -e $owed ]] || wait_group "$state" "$token"
        run_owed_post "$owed" 2>/dev/null || true
        rm -f "$state.guard"
        return 0
      fi
      flock -u 9
    fi
    sleep 1
  done
}

# write_guard_program FILE HOOK_KEY: the guard as a program (its functions, then the call).
# shellcheck disable=SC2154 # hook_dir is lib/hooks.sh's, sourced by every caller
write_guard_program() {
  {
    printf 'export LC_ALL=C PATH=%q\n' "$PATH"
    printf 'hook_dir=%q hook_key=%q record_dir=%q state_dir=%q\n' "$hook_dir" "$2" "$record_dir" "$state_dir"
    declare -f run_hook raidsnap_builtin_hook raidsnap_held_session raidsnap_cancel_session \
      run_owed_post raidsnap_guard \
      pre_hook_running wait_pre_hook wait_group
    printf '%s\n' 'raidsnap_guard "$@"'
  } >"$1.tmp"
  chmod 0700 "$1.tmp"
  mv -f "$1.tmp" "$1"
}

# arm_timer MOUNT_POINT SECONDS GUARD STATE OWED: where systemd runs, a transient timer is a
# second guard that also survives a restart of the agent's service (which would kill everything
# in its control group). It runs the same guard program, at once: it is armed for the deadline.
# Prints the timer's name, or nothing.
arm_timer() {
  local unit
  have_systemd || return 0
  unit=$(timer_unit "$1")
  stop_timer "$1"
  if systemd-run --quiet --unit="$unit" --on-active="$2s" --timer-property=AccuracySec=1s \
    "$(command -v bash)" "$3" "$4" "$1" "$5" now >/dev/null 2>&1; then
    printf '%s.timer\n' "$unit"
  else
    say "warning: could not add the systemd timer guard; the process guard remains"
  fi
}

stop_timer() {
  local unit
  have_systemd || return 0
  unit=$(timer_unit "$1")
  systemctl stop "$unit.timer" "$unit.service" >/dev/null 2>&1 || true
  systemctl reset-failed "$unit.service" "$unit.timer" >/dev/null 2>&1 || true
}
