#!/usr/bin/env bash
# raidsnap release (replace mode): unmount MountPoint and stop MdDevice so the old members can be
# detached. Refuses while anything uses the array (open files, other mounts, holders, a freeze);
# lazy unmount only when a member is gone, and never with a filesystem mounted below MountPoint
# (refused whatever the array's state). Superblocks are never touched.
# Refuses (UuidMismatch, changing nothing) when MdUuid is given and MdDevice holds another array.
# Safe to run again on a released array. Parameters (environment): SSM_MdDevice, SSM_MountPoint,
# SSM_MdUuid (may be empty: not checked).
set -euo pipefail

# shellcheck source=lib/system_directory.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/system_directory.sh"
# shellcheck source=lib/devices.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/devices.sh"
# shellcheck source=lib/freeze_guard.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/freeze_guard.sh"

# Unset: the document's default (a hand-run). Set but empty: refused like any other value that no
# pattern admits, so a blank MdDevice never turns into /dev/md0, which would then be
# unmounted and stopped.
md_dev=${SSM_MdDevice-/dev/md0}
mount_point=${SSM_MountPoint:-}
md_uuid=${SSM_MdUuid:-}
own_mount=${SSM_OwnMountPoint-false}
require_match MdDevice "$md_dev" '^/dev/md[0-9]{1,3}$'
if [[ -n $md_uuid ]]; then
  require_match MdUuid "$md_uuid" '^[0-9a-f]{8}(:[0-9a-f]{8}){3}$'
fi
require_match OwnMountPoint "$own_mount" '^(true|false)$'
require_mount_point MountPoint "$mount_point"
require_not_system_directory MountPoint "$mount_point" "$own_mount"
require_resolved_not_system_directory MountPoint "$mount_point" "$own_mount"
for tool in mdadm findmnt umount; do
  command -v "$tool" >/dev/null || fail ToolMissing "$tool is not installed"
done
md_name=${md_dev#/dev/}
changed=false

# The array must be the one the caller means: MdDevice may hold another array entirely (the
# device was recorded long ago, or reused since), and releasing that would take it away.
if [[ -n $md_uuid ]] && [[ -n $(ls -d /sys/block/"$md_name"/md/dev-* 2>/dev/null) ]]; then
  cur_uuid=$(kv MD_UUID "$(mdadm --detail --export "$md_dev" 2>/dev/null || true)")
  if [[ -z $cur_uuid ]]; then
    # An inactive array has no detail; its members' superblocks still say which array it is.
    for rd in /sys/block/"$md_name"/md/dev-*; do
      cur_uuid=$(kv MD_UUID "$(mdadm --examine --export "/dev/${rd##*/dev-}" 2>/dev/null || true)")
      [[ -n $cur_uuid ]] && break
    done
  fi
  [[ $cur_uuid == "$md_uuid" ]] ||
    fail UuidMismatch "$md_dev is array ${cur_uuid:-of unknown UUID}, not $md_uuid; nothing was changed"
fi

# Members as they are now, reported so the caller knows which volumes it may detach.
members_json=()
lost=false
if [[ -d /sys/block/$md_name/md ]]; then
  for rd in /sys/block/"$md_name"/md/dev-*; do
    [[ -e $rd ]] || continue
    name=${rd##*/dev-}
    slot=$(cat "$rd/slot" 2>/dev/null || true)
    st=$(cat "$rd/state" 2>/dev/null || true)
    [[ $st == *faulty* || ! -e /sys/class/block/$name ]] && lost=true
    serial=$(device_serial "/dev/$name")
    members_json+=("$(printf '{"device":%s,"volumeId":%s,"slot":%s,"state":%s}' "$(json_str "/dev/$name")" \
      "$(json_str_or_null "$(serial_volume_id "$serial")")" "$(json_int_or_null "$slot")" "$(json_str_or_null "$st")")")
  done
  array_state=$(cat "/sys/block/$md_name/md/array_state" 2>/dev/null || true)
  [[ $array_state == broken ]] && lost=true
  degraded=$(cat "/sys/block/$md_name/md/degraded" 2>/dev/null || echo 0)
  [[ $degraded != 0 ]] && lost=true
fi
# Whether the array can still serve its filesystem. A lost member (reported as memberLost) leaves
# a RAID 0 or linear array, or a broken one, unable to; a degraded mirror or parity array still
# serves every block, so its users and blockers are checked as with every member present.
serving=true
if $lost; then
  level=$(cat "/sys/block/$md_name/md/level" 2>/dev/null || true)
  if [[ $array_state == broken || $level == raid0 || $level == linear || -z $level ]]; then
    serving=false
  fi
fi

# Other disks whose superblock carries MdUuid and that no array holds: members of an older copy
# of this array. Reported (state not-assembled) so that replace mode detaches them too: left
# attached, mdadm --assemble --scan or udev at the next boot could mix them with new members.
if [[ -n $md_uuid ]]; then
  for dev in /sys/class/block/*; do
    name=${dev##*/}
    [[ $name == md* || $name == loop* || $name == ram* || $name == dm-* || $name == zram* ]] && continue
    [[ -e /sys/block/$md_name/md/dev-$name ]] && continue
    [[ -n $(ls -A "$dev/holders" 2>/dev/null) ]] && continue
    [[ $(kv MD_UUID "$(mdadm --examine --export "/dev/$name" 2>/dev/null || true)") == "$md_uuid" ]] || continue
    serial=$(device_serial "/dev/$name")
    members_json+=("$(printf '{"device":%s,"volumeId":%s,"slot":null,"state":"not-assembled"}' \
      "$(json_str "/dev/$name")" "$(json_str_or_null "$(serial_volume_id "$serial")")")")
  done
fi

# Processes that use the filesystem at $1 (empty: no filesystem, only the device) or the device
# $2: open files, working or root directory, program or mapped files. "pid(command)" each, on
# one line.
users_of() {
  local p l t pid mp=$1 dev=$2
  local -a found=()
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    for l in "$p"/cwd "$p"/root "$p"/exe "$p"/fd/*; do
      t=$(readlink "$l" 2>/dev/null) || continue
      if [[ -n $mp && ($t == "$mp" || $t == "$mp"/*) ]] || [[ $t == "$dev" ]]; then
        found+=("$pid($(cat "$p/comm" 2>/dev/null || true))")
        continue 2
      fi
    done
    if [[ -n $mp ]] && grep -qF " $mp/" "$p/maps" 2>/dev/null; then
      found+=("$pid($(cat "$p/comm" 2>/dev/null || true))")
    fi
  done
  printf '%s' "${found[*]}"
}

# A freeze of $1 that raidsnap's freeze document holds (its guard's state file and process).
frozen_by_raidsnap() {
  local state pid
  state=$(state_file "$1")
  [[ -s $state ]] || return 1
  read -r pid _ <"$state" || return 1
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null
}

mp_mm=$(findmnt -rn -o MAJ:MIN --mountpoint "$mount_point" 2>/dev/null | tail -n1 || true)
md_mm=$(cat "/sys/block/$md_name/dev" 2>/dev/null || true)
if [[ -n $mp_mm && $mp_mm != "$md_mm" ]]; then
  fail MountPointMismatch "$mount_point holds device $mp_mm, not $md_dev (${md_mm:-not present}); nothing was changed"
fi

# What else a member's volume carries that is in use: its other partitions (or, for a member
# that is a partition, the whole disk) mounted, held (device mapper, LVM, another md array),
# used as swap, or open in a process (a database on a raw partition). Detaching the volume takes all of it away, so such a member is a blocker like a
# filesystem in use, whether or not the array still serves. "name (volume) what" each.
sibling_users() {
  local rd name disk vol part pname mm where held
  local -a found=()
  for rd in /sys/block/"$md_name"/md/dev-*; do
    [[ -e $rd ]] || continue
    name=${rd##*/dev-}
    disk=$(parent_disk "/dev/$name")
    [[ -e /sys/class/block/$disk ]] || continue
    vol=$(serial_volume_id "$(device_serial "/dev/$disk")")
    for part in "/sys/class/block/$disk" /sys/class/block/"$disk"/"$disk"*; do
      [[ -e $part/dev ]] || continue
      pname=${part##*/}
      [[ $pname == "$name" ]] && continue
      mm=$(cat "$part/dev")
      where=$(findmnt -rn -o MAJ:MIN,TARGET | awk -v mm="$mm" '$1 == mm {print $2}' | paste -sd' ' - || true)
      held=$(find "$part/holders" -mindepth 1 -maxdepth 1 -printf '%f ' 2>/dev/null || true)
      # The member's own disk holds its partitions, and md holds the member: neither counts.
      [[ $pname == "$disk" ]] && held=""
      if [[ -n $where ]]; then
        found+=("$pname (${vol:-no volume id}) mounted at $where")
      elif [[ -n ${held// /} ]]; then
        found+=("$pname (${vol:-no volume id}) held by ${held% }")
      elif grep -q "^/dev/$pname " /proc/swaps 2>/dev/null; then
        found+=("$pname (${vol:-no volume id}) used as swap")
      elif [[ $pname != "$disk" ]] && users=$(users_of "" "/dev/$pname") && [[ -n $users ]]; then
        found+=("$pname (${vol:-no volume id}) open in $users")
      fi
    done
  done
  printf '%s' "${found[*]}"
}
siblings=$(sibling_users)
[[ -z $siblings ]] ||
  fail MemberDiskInUse "a member's volume carries more than $md_dev, in use: $siblings; detaching the volume would take it away. Unmount or release it first, or move it off the volume. Nothing was changed"

# Filesystems mounted below the mount point are someone else's (another array's, as /data/wal
# on md1 under /data on md0): a plain umount refuses them (EBUSY) and a lazy one detaches them
# too ("the filesystem and all filesystems mounted below it", umount(2), MNT_DETACH). Whether or
# not the array still serves, the release is refused before anything is changed.
if [[ -n $mp_mm ]]; then
  below=$(findmnt -rn -o TARGET | awk -v mp="$mount_point/" 'index($0, mp) == 1' | paste -sd' ' - || true)
  [[ -z $below ]] ||
    fail MountedElsewhere "filesystems are mounted below $mount_point: $below; unmount them first (unmounting $mount_point would detach them too). Nothing was changed"
fi

# 0. Every blocker first, while nothing is changed yet. With every member present, a lazy
#    unmount of a filesystem in use would leave its users writing to an array that is about to
#    be taken away (and new files landing on the root filesystem), and a frozen one would keep
#    its writers hung where no thaw can reach them. So it is refused, with who blocks it.
if $serving && [[ -n $md_mm ]]; then
  held=$(find "/sys/block/$md_name/holders" -mindepth 1 -maxdepth 1 -printf '%f ' 2>/dev/null || true)
  [[ -z $held ]] ||
    fail MdDeviceHeld "$md_dev is held by $held (device mapper, LVM or another md array on top of it); remove that first. Nothing was changed"
  targets=$(findmnt -rn -o MAJ:MIN,TARGET | awk -v mm="$md_mm" '$1 == mm {print $2}')
  others=$(grep -vxF "$mount_point" <<<"$targets" | paste -sd' ' - || true)
  [[ -z $others ]] ||
    fail MountedElsewhere "$md_dev is also mounted at $others (another or a bind mount); unmount it there first. Nothing was changed"
  if [[ -n $mp_mm ]]; then
    if frozen_by_raidsnap "$mount_point"; then
      fail FilesystemFrozen "$mount_point is frozen by a running backup (its thaw guard is alive); wait for the backup to thaw it. Nothing was changed"
    fi
  fi
  users=$(users_of "$( [[ -n $mp_mm ]] && printf '%s' "$mount_point")" "$md_dev")
  [[ -z $users ]] ||
    fail FilesystemInUse "$md_dev${mp_mm:+ (mounted at $mount_point)} is in use by $users; stop them first. Nothing was changed"
fi

# 1. Unmount, but only what is really this array (checked above).
unmount=not-mounted
if [[ -n $mp_mm ]]; then
  # With the array unable to serve, a normal umount can hang on the flush: detach lazily at
  # once. Otherwise a failing umount is refused instead (it changed nothing).
  if ! $serving; then
    umount -l "$mount_point" || fail UnmountFailed "umount -l $mount_point failed"
    unmount=lazy
  elif err=$(timeout 60 umount "$mount_point" 2>&1); then
    unmount=unmounted
  else
    fail UnmountFailed "umount $mount_point failed (${err:-timeout}); it stays mounted, nothing was changed"
  fi
  changed=true
  say "$mount_point: $unmount"
fi

# 2. Stop the array. The superblocks are left as they are: the old members stay a valid copy.
stop=already-stopped
if [[ -d /sys/block/$md_name/md ]] && [[ -n $(ls -d /sys/block/"$md_name"/md/dev-* 2>/dev/null) ]]; then
  others=$(findmnt -rn -o MAJ:MIN,TARGET | awk -v mm="$(cat "/sys/block/$md_name/dev")" '$1 == mm {print $2}' | paste -sd' ' -)
  [[ -z $others ]] || fail MdDeviceBusy "$md_dev is still mounted at $others"
  for i in 1 2 3 4 5; do
    if err=$(mdadm --stop "$md_dev" 2>&1); then
      stop=stopped
      break
    fi
    if [[ -S /run/udev/control ]]; then udevadm settle --timeout=10 >/dev/null 2>&1 || true; fi
    sleep "$i"
  done
  [[ $stop == stopped ]] || fail MdDeviceBusy "mdadm --stop $md_dev failed: $err"
  changed=true
  say "stopped $md_dev"
fi

printf '{"ok":true,"mdDevice":%s,"mountPoint":%s,"unmount":%s,"stop":%s,"memberLost":%s,"members":[%s],"changed":%s}\n' \
  "$(json_str "$md_dev")" "$(json_str "$mount_point")" "$(json_str "$unmount")" "$(json_str "$stop")" \
  "$lost" "$(IFS=,; printf '%s' "${members_json[*]}")" "$changed"
