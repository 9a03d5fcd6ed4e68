#!/usr/bin/env bash
# raidsnap discover: report every md array on this host with its members (device, NVMe serial,
# EBS volume id, slot, md state), md UUID, level, chunk, metadata, raid devices, how many are
# missing (degraded), filesystem and mount point. A member's slot is its RaidDevice number; a
# device that holds no working slot (a spare, one md marked faulty, one still rebuilding) has
# slot null, so that nobody takes it for a member.
# Parameter (environment): SSM_ArrayName, the array the caller looks for; arrays whose md name is
# that name (or <host>:<name>) carry "matchesArrayName": true. Last stdout line: one JSON object.
set -euo pipefail

# shellcheck source=lib/input.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/input.sh"
# shellcheck source=lib/devices.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/devices.sh"

array_name=${SSM_ArrayName:-}
require_match ArrayName "$array_name" '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$'
command -v mdadm >/dev/null || fail ToolMissing "mdadm is not installed"

arrays=()
for md in /sys/block/md*; do
  [[ -d $md/md ]] || continue
  dev=/dev/${md##*/}
  state=$(cat "$md/md/array_state" 2>/dev/null || true)
  ls -d "$md"/md/dev-* >/dev/null 2>&1 || continue   # a leftover node with no members
  detail=$(mdadm --detail --export "$dev" 2>/dev/null || true)
  level=$(cat "$md/md/level" 2>/dev/null || true)
  raid_disks=$(cat "$md/md/raid_disks" 2>/dev/null || true)
  # Devices missing from a redundant array (RAID 1/10/4/5/6); RAID 0 has no such count.
  degraded=$(cat "$md/md/degraded" 2>/dev/null || true)
  metadata=$(cat "$md/md/metadata_version" 2>/dev/null || true)
  chunk=$(cat "$md/md/chunk_size" 2>/dev/null || true)
  chunk_kib=""
  [[ $chunk =~ ^[0-9]+$ ]] && ((chunk > 0)) && chunk_kib=$((chunk / 1024))
  uuid=$(kv MD_UUID "$detail")
  name=$(kv MD_NAME "$detail")
  members=()
  for rd in "$md"/md/dev-*; do
    mdev=/dev/${rd##*/dev-}
    slot=$(cat "$rd/slot" 2>/dev/null || true)
    # in_sync, faulty, spare (a hot spare, or a member still being rebuilt), write_mostly...
    rstate=$(cat "$rd/state" 2>/dev/null || true)
    if [[ -z $uuid || -z $name ]]; then
      # An inactive array has no detail; its members' superblocks still say who they are.
      examine=$(mdadm --examine --export "$mdev" 2>/dev/null || true)
      [[ -n $uuid ]] || uuid=$(kv MD_UUID "$examine")
      [[ -n $name ]] || name=$(kv MD_NAME "$examine")
      [[ -n $level ]] || level=$(kv MD_LEVEL "$examine")
    fi
    serial=$(device_serial "$mdev")
    vol=$(serial_volume_id "$serial")
    [[ $slot =~ ^[0-9]+$ ]] || slot=""
    # Only an in-sync device holds its slot's data; md keeps a failed device's slot number
    # until it removes the device, and a rebuilding one has a slot before it has the data.
    if [[ ,$rstate, == *,faulty,* || ,$rstate, != *,in_sync,* ]]; then
      slot=""
    fi
    members+=("${slot:-99999} $(printf '{"device":%s,"serial":%s,"volumeId":%s,"slot":%s,"state":%s}' \
      "$(json_str "$mdev")" "$(json_str_or_null "$serial")" "$(json_str_or_null "$vol")" \
      "$(json_int_or_null "$slot")" "$(json_str_or_null "$rstate")")")
  done
  members_json=$(printf '%s\n' "${members[@]}" | sort -n -k1,1 | cut -d' ' -f2- | paste -sd, -)
  fs=$(blkid -p -o export "$dev" 2>/dev/null || true)
  fs_type=$(kv TYPE "$fs")
  if [[ -n $fs_type ]]; then
    fs_json=$(printf '{"type":%s,"uuid":%s,"label":%s}' "$(json_str "$fs_type")" \
      "$(json_str_or_null "$(kv UUID "$fs")")" "$(json_str "$(kv LABEL "$fs")")")
  else
    fs_json=null
  fi
  mount_point=$(findmnt -rn -o TARGET -S "$dev" 2>/dev/null | awk 'NR == 1' || true)
  matches=false
  [[ $name == "$array_name" || $name == *":$array_name" ]] && matches=true
  say "found $dev ${level:-?} ${uuid:-?} name=${name:-?} state=${state:-?} members=${#members[@]} mount=${mount_point:-none}"
  arrays+=("$(printf '{"device":%s,"name":%s,"uuid":%s,"level":%s,"chunkKib":%s,"metadata":%s,"state":%s,"raidDevices":%s,"degraded":%s,"members":[%s],"filesystem":%s,"mountPoint":%s,"matchesArrayName":%s}' \
    "$(json_str "$dev")" "$(json_str_or_null "$name")" "$(json_str_or_null "$uuid")" \
    "$(json_str_or_null "$level")" "$(json_int_or_null "$chunk_kib")" "$(json_str_or_null "$metadata")" \
    "$(json_str_or_null "$state")" "$(json_int_or_null "$raid_disks")" "$(json_int_or_null "$degraded")" \
    "$members_json" "$fs_json" "$(json_str_or_null "$mount_point")" "$matches")")
done

say "${#arrays[@]} md array(s) on $(hostname 2>/dev/null || echo this host)"
arrays_json=""
((${#arrays[@]})) && arrays_json=$(IFS=,; printf '%s' "${arrays[*]}")
printf '{"ok":true,"arrayName":%s,"arrays":[%s]}\n' "$(json_str "$array_name")" "$arrays_json"
