# shellcheck shell=bash
# shellcheck source=input.sh
source "$(dirname "${BASH_SOURCE[0]}")/input.sh"

# lib/system_directory.sh: where a restored filesystem is never mounted: "/", these system trees
# and everything under them, and these directories themselves (over a whole /var or /home
# everything in it would be hidden; /var/lib/postgresql, /srv/db or /mnt/md0 are fine). The same
# rule as the restore workflow's (raidsnap.models.system_directory), repeated because a script
# runs on its own. A replace puts the array back on the mount point it was released from (its
# own, OwnMountPoint=true): there the directories themselves (/srv, /home, /opt...) are allowed,
# the trees never.
system_trees=(/bin /boot /dev /etc /lib /lib32 /lib64 /libx32 /proc /root /run /sbin /sys /usr
  /tmp /var/tmp /var/run /var/lock /var/spool /var/log)
system_dirs=(/var /home /opt /srv /mnt /media)

# The system directory that the normalized absolute path $1 is or lies under, else nothing; with
# $2 true (the array's own mount point), only "/" and the trees count.
system_directory() {
  local d
  if [[ $1 == / ]]; then printf '/\n'; return 0; fi
  for d in "${system_trees[@]}"; do
    if [[ $1 == "$d" || $1 == "$d"/* ]]; then printf '%s\n' "$d"; return 0; fi
  done
  [[ ${2:-false} == true ]] && return 0
  for d in "${system_dirs[@]}"; do
    if [[ $1 == "$d" ]]; then printf '%s\n' "$d"; return 0; fi
  done
  return 0
}

# The rule on the value itself (after require_mount_point: a normalized absolute path).
require_not_system_directory() { # NAME VALUE [OWN]
  local found
  found=$(system_directory "$2" "${3:-false}")
  [[ -z $found ]] ||
    fail InvalidInput "$1 $2 is or lies under the system directory $found; a filesystem is never mounted over a system directory, whose files it would hide or replace"
}

# The rule on the path the kernel would use: the value with its symbolic links resolved, so that
# /mnt/x -> /etc is refused as /etc is.
require_resolved_not_system_directory() { # NAME VALUE [OWN]
  local found real
  real=$(readlink -m -- "$2" 2>/dev/null) || fail InvalidInput "$1 $2 cannot be resolved (a symbolic link loop?)"
  [[ $real == "$2" ]] && return 0
  found=$(system_directory "$real" "${3:-false}")
  [[ -z $found ]] ||
    fail InvalidInput "$1 $2 leads through a symbolic link to $real, which is or lies under the system directory $found"
}
