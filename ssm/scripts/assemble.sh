#!/usr/bin/env bash
# raidsnap assemble: bring up a restored md array from its EBS volumes. Finds every member by
# volume id, checks each superblock carries MdUuid (or NewMdUuid, when an earlier run gave it) and
# the member count matches, stops any array udev assembled on its own, assembles exactly these
# devices under MdDevice giving the array its own new md UUID (mdadm --update=uuid, see mdadm(8):
# "If a UUID is given with the --uuid option that UUID will be used as a new UUID and will NOT be
# used to help identify the devices"), mounts nosuid,nodev, and optionally persists (mdadm.conf
# and fstab by the new UUID, initramfs). An old member of the set's array, attached again later,
# then belongs to another array and can never be taken into this one at a boot. Never creates,
# formats, forces or zeroes anything.
# Parameters (environment): SSM_VolumeIds, SSM_MdUuid, SSM_NewMdUuid (empty: one is generated;
# equal to MdUuid: the array keeps its identity, for putting a user's own array back),
# SSM_MdDevice, SSM_MountPoint, SSM_ReadOnly, SSM_Persist. RAIDSNAP_DEVICE_WAIT_SECONDS (default
# 120) bounds the wait for the volumes to appear.
set -euo pipefail

# shellcheck source=lib/system_directory.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/system_directory.sh"
# shellcheck source=lib/devices.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/devices.sh"

# What this run made, and undoes if it fails afterwards (fail calls undo_ours): the mount it made
# and the array it assembled (never one that was already there). A half-made restore left
# assembled would keep its volumes busy and, at the next boot, mounted from fstab without anyone
# having checked it.
made_mount=false made_md=false failing=false conf_undo="" conf_path="" initramfs_status=skipped

undo_ours() {
  local -a undone=()
  if $made_mount; then
    if umount "$mount_point" 2>/dev/null; then
      undone+=("unmounted $mount_point")
      made_mount=false
    else
      undone+=("could not unmount $mount_point (in use?); it stays mounted")
    fi
  fi
  if $made_md && ! $made_mount; then
    if md_stop "$md_name"; then
      undone+=("stopped $md_dev")
    else
      undone+=("could not stop $md_dev")
    fi
    made_md=false
  fi
  # mdadm.conf as it was before this run wrote it (an ARRAY line for an array just stopped
  # would replace the released array's at the next boot).
  if [[ -n $conf_undo && -f $conf_undo ]]; then
    if cmp -s "$conf_undo" "$conf_path"; then
      rm -f "$conf_undo"
    else
      mv -f "$conf_undo" "$conf_path"
      undone+=("put $conf_path back as it was")
      if [[ $initramfs_status == updated ]]; then
        if { update-initramfs -u || dracut -f; } >/dev/null 2>&1; then
          undone+=("updated the initramfs again")
        else
          undone+=("could not update the initramfs again: run update-initramfs -u (or dracut -f)")
        fi
      fi
    fi
    conf_undo=""
  fi
  local out="" x
  for x in "${undone[@]}"; do out+="${out:+, }$x"; done
  printf '%s' "$out"
}

# Every existing directory above the mount point, on the path as given and as resolved, must be
# root's and writable by nobody else: otherwise its owner could swap a component for a symbolic
# link to a system directory between these checks and the mount.
require_root_owned_parents() { # NAME VALUE
  local path dir owner mode
  for path in "$2" "$(readlink -m -- "$2")"; do
    dir=$path
    while [[ $dir != / ]]; do
      dir=${dir%/*}
      [[ -n $dir ]] || dir=/
      [[ -e $dir ]] || continue
      read -r owner mode < <(stat -L -c '%u %a' -- "$dir") || fail InvalidInput "$1 $2: cannot stat $dir"
      if [[ $owner != 0 ]] || ((8#$mode & 8#022)); then
        fail InvalidInput "$1 $2 is below $dir, which is owned by uid $owner with mode $mode: only root may be able to change the directories above a mount point"
      fi
    done
  done
}

# Let udev finish what it is doing (incremental assembly, device links) before looking.
settle() {
  if [[ -S /run/udev/control ]] && command -v udevadm >/dev/null; then
    udevadm settle --timeout=15 >/dev/null 2>&1 || true
  fi
}

# md arrays (kernel names) that hold the kernel device $1.
md_holders() {
  local h
  for h in /sys/class/block/"$1"/holders/*; do
    [[ -e $h ]] && printf '%s\n' "${h##*/}"
  done
  return 0
}

# maj:min of a block device kernel name.
dev_majmin() { cat "/sys/class/block/$1/dev"; }

# Mount targets of the block device with kernel name $1.
mount_targets() {
  local mm
  mm=$(dev_majmin "$1")
  findmnt -rn -o MAJ:MIN,TARGET | awk -v mm="$mm" '$1 == mm {print $2}'
}

# Kernel names of the members currently bound to md array $1.
md_member_names() {
  local rd
  for rd in /sys/block/"$1"/md/dev-*; do
    [[ -e $rd ]] && printf '%s\n' "${rd##*/dev-}"
  done
  return 0
}

# Stop md array $1, retrying while udev or a prober still has it open.
md_stop() {
  local i err=""
  for i in 1 2 3 4 5; do
    if err=$(mdadm --stop "/dev/$1" 2>&1); then
      return 0
    fi
    settle
    sleep "$i"
  done
  say "mdadm --stop /dev/$1: $err"
  return 1
}

# Unset: the document's default (a hand-run). Set but empty: refused like any other value that no
# pattern admits, so a blank MdDevice, ReadOnly or Persist never turns into /dev/md0, false
# (a read-write remount) or true (fstab and mdadm.conf written).
volume_csv=${SSM_VolumeIds:-}
md_uuid=${SSM_MdUuid:-}
new_uuid=${SSM_NewMdUuid-}
md_dev=${SSM_MdDevice-/dev/md0}
mount_point=${SSM_MountPoint:-}
read_only=${SSM_ReadOnly-false}
persist=${SSM_Persist-true}
own_mount=${SSM_OwnMountPoint-false}
wait_seconds=${RAIDSNAP_DEVICE_WAIT_SECONDS:-120}

require_match VolumeIds "$volume_csv" '^vol-[0-9a-f]{8,17}(,vol-[0-9a-f]{8,17}){0,39}$'
require_match MdUuid "$md_uuid" '^[0-9a-f]{8}(:[0-9a-f]{8}){3}$'
require_match NewMdUuid "$new_uuid" '^([0-9a-f]{8}(:[0-9a-f]{8}){3})?$'
require_match MdDevice "$md_dev" '^/dev/md[0-9]{1,3}$'
require_match OwnMountPoint "$own_mount" '^(true|false)$'
require_mount_point MountPoint "$mount_point"
require_not_system_directory MountPoint "$mount_point" "$own_mount"
require_match ReadOnly "$read_only" '^(true|false)$'
require_match Persist "$persist" '^(true|false)$'
[[ $wait_seconds =~ ^[0-9]{1,4}$ ]] || fail InvalidInput "RAIDSNAP_DEVICE_WAIT_SECONDS must be a number"
require_resolved_not_system_directory MountPoint "$mount_point" "$own_mount"
require_root_owned_parents MountPoint "$mount_point"
for tool in mdadm blkid findmnt mount; do
  command -v "$tool" >/dev/null || fail ToolMissing "$tool is not installed"
done
IFS=, read -r -a volumes <<<"$volume_csv"
dup=$(printf '%s\n' "${volumes[@]}" | sort | uniq -d | awk 'NR == 1')
[[ -z $dup ]] || fail InvalidInput "VolumeIds lists $dup twice"
md_name=${md_dev#/dev/}
if [[ -z $new_uuid ]]; then
  # A hand run: a fresh identity, in mdadm's notation (four groups of 8 hex digits).
  new_uuid=$(tr -d '-' </proc/sys/kernel/random/uuid | sed 's/\(........\)/\1:/g; s/:$//')
  say "no NewMdUuid given: the array gets $new_uuid (give it as NewMdUuid to run again)"
fi
changed=false
warnings=()
stage=checks

# Anything that stops the script without a named error (a write that fails under set -e) after
# it assembled or mounted still undoes that, and still ends with a JSON line.
on_exit() {
  local rc=$?
  trap - EXIT
  if ((rc != 0)) && ! $failing; then
    if [[ $stage == persist ]]; then
      fail PersistFailed "writing mdadm.conf, the initramfs or fstab stopped (exit $rc)"
    fi
    fail AssembleFailed "stopped unexpectedly (exit $rc) while at $stage"
  fi
  exit "$rc"
}
trap on_exit EXIT

# 1. Every volume must show up as a block device (attachments take a while to appear).
say "waiting up to ${wait_seconds}s for ${#volumes[@]} volume(s)"
deadline=$((SECONDS + wait_seconds))
while :; do
  disks=() missing=()
  for vol in "${volumes[@]}"; do
    d=$(volume_device "$vol")
    if [[ -n $d ]]; then disks+=("$d"); else missing+=("$vol"); fi
  done
  ((${#missing[@]} == 0)) && break
  if ((SECONDS >= deadline)); then
    fail MemberMissing "no block device for ${missing[*]} after ${wait_seconds}s (is it attached to this instance?)"
  fi
  settle
  sleep 2
done
settle

# 2. Each volume must carry a superblock of exactly this array: the set's identity (MdUuid), or
#    the new one if an earlier run of this restore gave it already. The superblock may sit on the
#    whole disk or on one of its partitions.
members=() names=() dev_uuids=() raid_devices="" renamed=() unrenamed=()
for i in "${!volumes[@]}"; do
  vol=${volumes[i]} disk=${disks[i]}
  candidates=("$disk")
  for p in /sys/class/block/"${disk#/dev/}"/*/partition; do
    [[ -e $p ]] && candidates+=("/dev/$(basename "$(dirname "$p")")")
  done
  member="" examine="" seen_uuid=""
  for c in "${candidates[@]}"; do
    e=$(mdadm --examine --export "$c" 2>/dev/null || true)
    u=$(kv MD_UUID "$e")
    [[ -n $u ]] || continue
    seen_uuid=$u
    if [[ $u == "$md_uuid" || $u == "$new_uuid" ]]; then
      member=$c examine=$e
      break
    fi
  done
  if [[ -z $member ]]; then
    if [[ -n $seen_uuid ]]; then
      fail UuidMismatch "$vol ($disk) belongs to md array $seen_uuid, not $md_uuid (nor $new_uuid, the identity this restore gives)"
    fi
    fail NoMdSuperblock "$vol ($disk) carries no md superblock"
  fi
  n=$(kv MD_DEVICES "$examine")
  if [[ -z $raid_devices ]]; then raid_devices=$n; fi
  members+=("$member")
  names+=("${member#/dev/}")
  dev_uuids+=("$(kv MD_DEV_UUID "$examine")")
  if [[ $seen_uuid == "$new_uuid" ]]; then renamed+=("$vol"); else unrenamed+=("$vol"); fi
  say "$vol -> $member (array $seen_uuid, $(kv MD_LEVEL "$examine"), $n devices)"
done
if ((${#renamed[@]} && ${#unrenamed[@]})) && [[ $new_uuid != "$md_uuid" ]]; then
  fail UuidMismatch "${renamed[*]} already carry the new identity $new_uuid and ${unrenamed[*]} still carry $md_uuid: an earlier assemble stopped while it wrote the superblocks, and mdadm assembles no array from members that disagree. Nothing was changed; restore again (a new restore creates new volumes from the snapshots)"
fi
# Whether the superblocks still need the new identity (mdadm writes it while assembling).
update_uuid=false
((${#unrenamed[@]})) && [[ $new_uuid != "$md_uuid" ]] && update_uuid=true
if [[ $raid_devices != "${#volumes[@]}" ]]; then
  fail MemberCountMismatch "the superblocks say the array has ${raid_devices:-?} devices, ${#volumes[@]} volume ids were given"
fi
dup=$(printf '%s\n' "${dev_uuids[@]}" | grep -v '^$' | sort | uniq -d | awk 'NR == 1')
[[ -z $dup ]] || fail DuplicateMember "two volumes carry the same member (device uuid $dup): copies of one disk?"

# 2b. Other disks. Those that carry the set's identity (old members, or the live array a copy is
#     restored next to) keep it: once this array has its new identity they can never be taken
#     into it, at this boot or any later one, so they are only reported. A disk that already
#     carries the new identity is refused (CopyAttached): two sets of disks under one identity
#     are what mdadm --assemble --scan or udev's incremental assembly could mix at a boot (RAID 0
#     event counts cannot tell them apart), and that is what the new identity exists to rule out.
given_disks=" "
for m in "${members[@]}"; do given_disks+="$(parent_disk "$m") "; done
copies=() old_members=()
for dev in /sys/class/block/*; do
  name=${dev##*/}
  case $name in md* | loop* | ram* | zram* | dm-* | sr*) continue ;; esac
  [[ $given_disks == *" $(parent_disk "/dev/$name") "* ]] && continue
  u=$(kv MD_UUID "$(mdadm --examine --export "/dev/$name" 2>/dev/null || true)")
  [[ $u == "$md_uuid" || $u == "$new_uuid" ]] || continue
  vol=$(serial_volume_id "$(device_serial "/dev/$name")")
  if [[ $u == "$new_uuid" ]]; then
    copies+=("/dev/$name${vol:+ ($vol)}")
  else
    old_members+=("/dev/$name${vol:+ ($vol)}")
  fi
done
if ((${#copies[@]})); then
  fail CopyAttached "other disks already carry md UUID $new_uuid, the identity this restore gives: ${copies[*]}. Two sets of disks under one identity could be mixed at a boot; detach those (their volumes are kept) and assemble again. Nothing was changed"
fi
if ((${#old_members[@]})) && [[ $new_uuid != "$md_uuid" ]]; then
  warnings+=("disks of the set's own array (md UUID $md_uuid) are attached: ${old_members[*]}; they keep that identity and cannot join the restored array ($new_uuid)")
fi

# 3. Arrays that already hold our members: our own MdDevice (nothing to do), or one that udev's
#    incremental assembly built (md127 and the like, active or inactive), which we stop. A member
#    in use by anything else, or a stray array that is mounted, is refused.
already=false
strays=()
for name in "${names[@]}"; do
  while read -r holder; do
    [[ -n $holder ]] || continue
    if [[ $holder != md* ]]; then
      fail MemberInUse "/dev/$name is in use by /dev/$holder"
    fi
    huuid=$(kv MD_UUID "$(mdadm --detail --export "/dev/$holder" 2>/dev/null || true)")
    if [[ -n $huuid && $huuid != "$md_uuid" && $huuid != "$new_uuid" ]]; then
      fail MemberInUse "/dev/$name is a member of /dev/$holder (array $huuid)"
    fi
    [[ $holder == "$md_name" ]] && continue
    if [[ -n $(mount_targets "$holder") ]] || [[ -n $(ls -A "/sys/class/block/$holder/holders" 2>/dev/null) ]]; then
      fail MemberInUse "/dev/$name is in /dev/$holder, which is mounted or in use"
    fi
    [[ " ${strays[*]} " == *" $holder "* ]] || strays+=("$holder")
  done < <(md_holders "$name")
done

# 4. What MdDevice holds now.
if [[ -d /sys/block/$md_name/md ]] && [[ -n $(md_member_names "$md_name") ]]; then
  cur_uuid=$(kv MD_UUID "$(mdadm --detail --export "$md_dev" 2>/dev/null || true)")
  cur_state=$(cat "/sys/block/$md_name/md/array_state" 2>/dev/null || true)
  want=$(printf '%s\n' "${names[@]}" | sort)
  have=$(md_member_names "$md_name" | sort)
  if [[ -n $cur_uuid && $cur_uuid != "$md_uuid" && $cur_uuid != "$new_uuid" ]]; then
    fail MdDeviceBusy "$md_dev is already array $cur_uuid; choose another MdDevice or release it first"
  elif [[ $want == "$have" && $cur_uuid == "$new_uuid" && $cur_state =~ ^(clean|active|active-idle|read-auto|readonly)$ ]]; then
    already=true
    say "$md_dev is already active as $new_uuid with exactly these members"
  elif [[ $want == "$have" && $(cat "/sys/block/$md_name/md/degraded" 2>/dev/null || echo 0) != 0 ]]; then
    # Running degraded from exactly these members: stopping it to give it its identity would
    # only bring it back degraded. Someone's array as it was: left running.
    fail AssembleFailed "$md_dev is running degraded from these members; left it running as it was"
  elif [[ $want == "$have" && -n $(mount_targets "$md_name") ]]; then
    fail MdDeviceBusy "$md_dev holds exactly these members under the set's identity $md_uuid and is mounted: it cannot get its own identity while mounted. Unmount it and run again. Nothing was changed"
  elif [[ -n $(mount_targets "$md_name") ]]; then
    fail MdDeviceBusy "$md_dev is mounted but holds other devices ($(echo "$have" | paste -sd' ' -)) than requested"
  else
    # Made only of requested devices, but not all of them (an earlier failed run, or udev):
    # stop it and assemble exactly the requested devices. An array with any other member is
    # someone's copy of this array, or another array: never stopped here.
    others=$(printf '%s\n' "$have" | grep -vxF -f <(printf '%s\n' "${names[@]}") | paste -sd' ' - || true)
    [[ -z $others ]] ||
      fail MdDeviceBusy "$md_dev holds other devices ($others) than the volumes given; it was not stopped. Release it first, or choose another MdDevice"
    strays+=("$md_name")
  fi
fi

stopped=()
for s in "${strays[@]}"; do
  say "stopping /dev/$s, assembled from these members before us"
  md_stop "$s" || fail MemberInUse "could not stop /dev/$s which holds members of $md_uuid"
  stopped+=("/dev/$s")
  changed=true
done

# 5. Assemble exactly these devices under the requested name. No --run: an incomplete array
#    must not start, and no --force: a member that disagrees is a reason to stop, not to guess.
if ! $already; then
  attempt=0
  while :; do
    attempt=$((attempt + 1))
    settle
    # udev may have grabbed a member again between our stop and now (a close-after-write event).
    for name in "${names[@]}"; do
      while read -r holder; do
        [[ -n $holder && $holder == md* ]] || continue
        say "stopping /dev/$holder, which took /dev/$name again"
        md_stop "$holder" || true
        stopped+=("/dev/$holder")
      done < <(md_holders "$name")
    done
    # Exactly the devices checked above. --config=none: an ARRAY line for MdDevice in mdadm.conf
    # (the released array's, or an earlier restore's) must not stand in for the identity.
    if $update_uuid; then
      assemble_args=(--config=none --update=uuid --uuid="$new_uuid")
    else
      assemble_args=(--config=none --uuid="$new_uuid")
    fi
    if out=$(mdadm --assemble "$md_dev" "${assemble_args[@]}" "${members[@]}" 2>&1); then
      say "$out"
      made_md=true
      break
    fi
    say "mdadm --assemble (attempt $attempt): $out"
    if ((attempt >= 3)); then
      fail AssembleFailed "mdadm --assemble $md_dev ${assemble_args[*]} ${members[*]} failed: $(tail -n 3 <<<"$out" | paste -sd' ' -)"
    fi
    sleep 2
  done
  changed=true
  settle
  for _ in $(seq 1 50); do
    [[ -b $md_dev ]] && break
    sleep 0.2
  done
fi
state=$(cat "/sys/block/$md_name/md/array_state" 2>/dev/null || true)
[[ $state =~ ^(clean|active|active-idle|read-auto|readonly)$ ]] || fail AssembleFailed "$md_dev is $state after assembly"
degraded=$(cat "/sys/block/$md_name/md/degraded" 2>/dev/null || echo 0)
if [[ $degraded != 0 ]]; then
  # One this run assembled is stopped again by fail (undo_ours); one that was already running
  # is someone's array and stays as it was.
  if $made_md; then
    fail AssembleFailed "$md_dev came up degraded ($degraded missing); stopped it again"
  fi
  fail AssembleFailed "$md_dev is running degraded ($degraded missing); left it running as it was"
fi
level=$(cat "/sys/block/$md_name/md/level")
metadata=$(cat "/sys/block/$md_name/md/metadata_version")
live_uuid=$(kv MD_UUID "$(mdadm --detail --export "$md_dev" 2>/dev/null || true)")
[[ $live_uuid == "$new_uuid" ]] ||
  fail AssembleFailed "$md_dev came up as array ${live_uuid:-of unknown UUID}, not $new_uuid"

members_json=() slots=()
for i in "${!volumes[@]}"; do
  slot=$(cat "/sys/block/$md_name/md/dev-${names[i]}/slot" 2>/dev/null || true)
  slots+=("$slot")
  members_json+=("$(printf '{"volumeId":%s,"device":%s,"slot":%s}' "$(json_str "${volumes[i]}")" \
    "$(json_str "${members[i]}")" "$(json_int_or_null "$slot")")")
done
if [[ $(printf '%s\n' "${slots[@]}") != "$(seq 0 $((${#volumes[@]} - 1)))" ]]; then
  warnings+=("VolumeIds are not in member order; slots are ${slots[*]}")
fi

# 6. Mount. ReadOnly mounts the filesystem read-only; the array itself stays writable so that
#    ext4/xfs can replay the journal of a crash-consistent copy. (norecovery/noload would show a
#    filesystem with its last transactions missing, so they are not used.) Restored data is data:
#    nosuid and nodev always (a set-user-ID file or a device node on it grants nothing), noexec
#    too on a read-only copy.
fs=$(blkid -p -o export "$md_dev" 2>/dev/null || true)
fs_type=$(kv TYPE "$fs") fs_uuid=$(kv UUID "$fs") fs_label=$(kv LABEL "$fs")
[[ -n $fs_type && -n $fs_uuid ]] || fail NoFilesystem "$md_dev holds no filesystem that blkid recognises"
opts=rw,nosuid,nodev
[[ $read_only == true ]] && opts=ro,nosuid,nodev,noexec
# A user's own array put back (it keeps its identity) is mounted as it was before the replace.
if [[ $new_uuid == "$md_uuid" ]]; then
  opts=defaults
  [[ $read_only == true ]] && opts=ro
fi
# The same filesystem UUID mounted from another device: the live array a copy is restored next
# to. XFS refuses a second mount of one UUID unless told nouuid (xfs(5)); ext4 does not check.
twin=$(findmnt -rn -o SOURCE,UUID | awk -v u="$fs_uuid" -v d="$md_dev" '$2 == u && $1 != d && !n++ {print $1}')
if [[ -n $twin && $fs_type == xfs ]]; then
  opts+=,nouuid
fi
md_mm=$(dev_majmin "$md_name")
mp_mm=$(findmnt -rn -o MAJ:MIN --mountpoint "$mount_point" 2>/dev/null | tail -n1 || true)
elsewhere=$(mount_targets "$md_name" | grep -vxF "$mount_point" | awk 'NR == 1' || true)
if [[ -n $mp_mm && $mp_mm != "$md_mm" ]]; then
  fail MountPointBusy "$mount_point already has another filesystem ($mp_mm) mounted"
elif [[ -n $elsewhere ]]; then
  fail MountConflict "$md_dev is already mounted at $elsewhere"
elif [[ -n $mp_mm ]]; then
  cur_ro=$(findmnt -rn -o OPTIONS --mountpoint "$mount_point" | tail -n1 | tr , '\n' | grep -cx ro || true)
  if [[ $read_only == true && $cur_ro == 0 ]] || [[ $read_only == false && $cur_ro != 0 ]]; then
    want_opt=rw
    [[ $read_only == true ]] && want_opt=ro
    mount -o "remount,$want_opt" "$mount_point" || fail MountFailed "could not remount $mount_point $want_opt"
    changed=true
    say "remounted $mount_point $want_opt"
  else
    say "$md_dev is already mounted at $mount_point"
  fi
else
  mkdir -p "$mount_point"
  if [[ -n $(ls -A "$mount_point" 2>/dev/null) ]]; then
    # A system directory itself (/srv, /home, /var...) is allowed only as the array's own mount
    # point, where the array was mounted: there it is the empty directory under the array. One
    # with files in it is the system's (the OwnMountPoint claim is wrong, or stale): mounting
    # there would hide them, and the fstab line would do so at every boot.
    if [[ -n $(system_directory "$mount_point" false) ]]; then
      fail MountPointNotEmpty "$mount_point is a system directory with files in it, so it is not where this array was mounted: it would hide them. Move them away if they are the array's leftovers, or restore with another mountPoint. Nothing was mounted"
    fi
    warnings+=("$mount_point was not empty; its files are hidden while the array is mounted")
  fi
  err=$(mount -t "$fs_type" -o "$opts" "$md_dev" "$mount_point" 2>&1) ||
    fail MountFailed "mount -t $fs_type -o $opts $md_dev $mount_point failed: $err"
  made_mount=true
  changed=true
  say "mounted $md_dev ($fs_type) at $mount_point ($opts)"
fi

# Replace the file's content with stdin's if it differs; prints unchanged|written.
write_if_changed() {
  local target=$1 tmp
  tmp=$(mktemp "$(dirname "$target")/.raidsnap.XXXXXX")
  cat >"$tmp"
  if [[ -f $target ]] && cmp -s "$tmp" "$target"; then
    rm -f "$tmp"; echo unchanged; return 0
  fi
  if [[ -f $target ]]; then
    chmod --reference="$target" "$tmp" 2>/dev/null || chmod 0644 "$tmp"
    cp -p "$target" "$target.raidsnap-$(date +%Y%m%d%H%M%S).bak"
  else
    chmod 0644 "$tmp"
  fi
  mv -f "$tmp" "$target"
  echo written
}

# 7. Persist: ARRAY line by the array's own UUID, initramfs, fstab line by
#    /dev/disk/by-id/md-uuid-<UUID> (the link mdadm's udev rule 63-md-raid-arrays.rules makes for
#    every array from MD_UUID), which only this array has: never by filesystem UUID or label,
#    which the array's old members (a RAID 1/10 half can assemble on its own) or a copy next to it
#    present too. Each replaced or added, so a second run writes nothing.
conf_status=skipped initramfs_status=skipped fstab_status=skipped conf_path="" fstab_path=/etc/fstab
stage=persist
if [[ $persist == true ]]; then
  if [[ -d /etc/mdadm ]]; then conf_path=/etc/mdadm/mdadm.conf; else conf_path=/etc/mdadm.conf; fi
  [[ -f $fstab_path ]] || : >>"$fstab_path"
  fs_opts="$opts,nofail,x-systemd.device-timeout=30s"
  pass=0
  [[ $fs_type == ext* ]] && pass=2
  by_md="/dev/disk/by-id/md-uuid-$new_uuid"
  fstab_line="$by_md $mount_point $fs_type $fs_opts 0 $pass"
  # Every check that can stop the persist comes before anything is written. Lines for another
  # mount point that name this filesystem by UUID or label (the live array's, when a copy is
  # restored next to it) would now match two devices: at the next boot either could be mounted
  # there. Each is pointed at the array mounted there now, by its own md UUID; one that cannot
  # be (nothing mounted there from an md array) stops the persist. Mount points are compared as
  # mount(8) reads them, without trailing slashes.
  rewrites=""
  while read -r spec mp; do
    [[ -n $mp ]] || continue
    src=$(findmnt -rn -o SOURCE --mountpoint "$mp" 2>/dev/null | tail -n1 || true)
    other=""
    [[ $src == /dev/md* && $src != "$md_dev" ]] &&
      other=$(kv MD_UUID "$(mdadm --detail --export "$src" 2>/dev/null || true)")
    [[ -n $other && $other != "$new_uuid" ]] ||
      fail PersistFailed "$fstab_path names this filesystem ($spec) for $mp, and no other md array is mounted there to name instead: at the next boot $mp could get the restored array. Change that line to name its device by /dev/disk/by-id/md-uuid-<its UUID>, then run again. mdadm.conf and fstab were not changed"
    rewrites+="$spec $mp /dev/disk/by-id/md-uuid-$other"$'\n'
  done < <(awk -v u="$fs_uuid" -v l="$fs_label" -v mp="$mount_point" '
    function norm(p) { while (length(p) > 1 && substr(p, length(p)) == "/") p = substr(p, 1, length(p) - 1); return p }
    $1 !~ /^#/ && NF >= 2 && norm($2) != mp { s = $1; gsub(/"/, "", s)
      if (s == "UUID=" u || s == "/dev/disk/by-uuid/" u || (l != "" && (s == "LABEL=" l || s == "/dev/disk/by-label/" l))) print $1, $2 }' "$fstab_path")

  [[ -f $conf_path ]] || : >>"$conf_path"
  # What undo_ours puts back if anything below fails: mdadm.conf as it was.
  conf_undo=$(mktemp "$(dirname "$conf_path")/.raidsnap-undo.XXXXXX")
  cp -p "$conf_path" "$conf_undo"
  array_line="ARRAY $md_dev metadata=$metadata UUID=$new_uuid"
  # Records are a line plus its indented continuation lines. A record with our UUID is
  # replaced; another array claiming our device name is commented out (it can no longer be it);
  # every other record (the live array a copy is restored next to) stays as it is.
  # The set's own identity: the live array's while one runs under it here (a copy restored next
  # to it), whose record stays; else the array this restore replaced, whose record goes.
  replaced=$md_uuid
  for a in /sys/block/md*; do
    [[ -d $a/md && /dev/${a##*/} != "$md_dev" ]] || continue
    if [[ $(kv MD_UUID "$(mdadm --detail --export "/dev/${a##*/}" 2>/dev/null || true)") == "$md_uuid" ]]; then
      replaced=""
    fi
  done
  if [[ $replaced == "$new_uuid" ]]; then replaced=""; fi
  new_conf=$(awk -v line="$array_line" -v uuid="$new_uuid" -v dev="$md_dev" -v old="$replaced" '
    function flush(   n, i, parts, f, u) {
      if (rec == "") return
      n = split(rec, parts, "\n")
      split(parts[1], f, /[ \t]+/)
      u = tolower(rec)
      if (f[1] == "ARRAY" && index(u, "uuid=" uuid) > 0) {
        if (!done) { print line; done = 1 }
      } else if (f[1] == "ARRAY" && (f[2] == dev || (old != "" && index(u, "uuid=" old) > 0))) {
        for (i = 1; i <= n; i++) print "# raidsnap: " dev " is now " uuid ": " parts[i]
      } else {
        for (i = 1; i <= n; i++) print parts[i]
      }
      rec = ""
    }
    /^[ \t]+[^ \t]/ && rec != "" { rec = rec "\n" $0; next }
    { flush(); rec = $0 }
    END { flush(); if (!done) print line }
  ' "$conf_path")
  conf_had=$(grep -v '^[[:space:]]*#' "$conf_path" | grep -ci -e "uuid=$new_uuid" -e "^ARRAY[[:space:]]\+${md_dev}[[:space:]]" ${replaced:+-e "uuid=$replaced"} || true)
  wrote=$(printf '%s\n' "$new_conf" | write_if_changed "$conf_path")
  if [[ $wrote == unchanged ]]; then
    conf_status=unchanged
  elif ((conf_had > 0)); then
    conf_status=replaced
  else
    conf_status=added
  fi
  [[ $conf_status == unchanged ]] || changed=true

  if [[ $conf_status == unchanged ]]; then
    initramfs_status=unchanged
  elif command -v update-initramfs >/dev/null; then
    if err=$(update-initramfs -u 2>&1); then initramfs_status=updated; else
      initramfs_status=failed; warnings+=("update-initramfs -u failed: $(tail -n 2 <<<"$err" | paste -sd' ' -)")
    fi
  elif command -v dracut >/dev/null; then
    if err=$(dracut -f 2>&1); then initramfs_status=updated; else
      initramfs_status=failed; warnings+=("dracut -f failed: $(tail -n 2 <<<"$err" | paste -sd' ' -)")
    fi
  else
    initramfs_status=skipped-no-tool
    warnings+=("neither update-initramfs nor dracut is installed: the initramfs was not updated")
  fi

  had=$(awk -v u="UUID=$fs_uuid" -v mp="$mount_point" -v m="$by_md" '
    function norm(p) { while (length(p) > 1 && substr(p, length(p)) == "/") p = substr(p, 1, length(p) - 1); return p }
    $1 !~ /^#/ && NF >= 2 { s = $1; gsub(/"/, "", s); if (s == u || s == m || norm($2) == mp) n++ } END { print n + 0 }' "$fstab_path")
  new_fstab=$(awk -v mp="$mount_point" -v m="$by_md" -v line="$fstab_line" -v rw="$rewrites" '
    function norm(p) { while (length(p) > 1 && substr(p, length(p)) == "/") p = substr(p, 1, length(p) - 1); return p }
    BEGIN { n = split(rw, r, "\n"); for (i = 1; i <= n; i++) if (r[i] != "") { split(r[i], f, " "); to[f[1] " " f[2]] = f[3] } }
    $1 !~ /^#/ && NF >= 2 && (($1 " " $2) in to) { k = $1 " " $2; $1 = to[k]; print; next }
    $1 !~ /^#/ && NF >= 2 { s = $1; gsub(/"/, "", s)
      if (norm($2) == mp || s == m) { if (!done) { print line; done = 1 }; next } }
    { print }
    END { if (!done) print line }' "$fstab_path")
  wrote=$(printf '%s\n' "$new_fstab" | write_if_changed "$fstab_path")
  if [[ $wrote == unchanged ]]; then fstab_status=unchanged
  elif ((had > 0)); then fstab_status=replaced
  else fstab_status=added
  fi
  if [[ $fstab_status != unchanged ]]; then
    changed=true
    if [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null; then
      systemctl daemon-reload >/dev/null 2>&1 || warnings+=("systemctl daemon-reload failed")
    fi
  fi
  rm -f "$conf_undo"
  conf_undo=""
  say "persisted: mdadm.conf $conf_status ($conf_path), initramfs $initramfs_status, fstab $fstab_status"
fi

stage=report
# From here on the array and its mount are the caller's: nothing below undoes them.
made_mount=false made_md=false
w=""
for x in "${warnings[@]}"; do
  say "warning: $x"
  w+="${w:+,}$(json_str "$x")"
done
s=""
for x in "${stopped[@]}"; do s+="${s:+,}$(json_str "$x")"; done
printf '{"ok":true,"mdDevice":%s,"uuid":%s,"setMdUuid":%s,"level":%s,"metadata":%s,"members":[%s],"mountPoint":%s,"filesystem":{"type":%s,"uuid":%s},"readOnly":%s,"alreadyAssembled":%s,"stoppedArrays":[%s],"persisted":{"mdadmConf":%s,"mdadmConfPath":%s,"initramfs":%s,"fstab":%s},"changed":%s,"warnings":[%s]}\n' \
  "$(json_str "$md_dev")" "$(json_str "$new_uuid")" "$(json_str "$md_uuid")" "$(json_str "$level")" "$(json_str "$metadata")" \
  "$(IFS=,; printf '%s' "${members_json[*]}")" "$(json_str "$mount_point")" "$(json_str "$fs_type")" \
  "$(json_str "$fs_uuid")" "$read_only" "$already" "$s" "$(json_str "$conf_status")" \
  "$(json_str_or_null "$conf_path")" "$(json_str "$initramfs_status")" "$(json_str "$fstab_status")" \
  "$changed" "$w"
