# shellcheck shell=bash
# lib/freeze_guard.sh: the guard that freeze leaves to thaw a mount point in time.

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
