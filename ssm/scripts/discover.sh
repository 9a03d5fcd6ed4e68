#!/usr/bin/env bash
# raidsnap discover: report every md array on this host with its members (device, NVMe serial,
# EBS volume id, slot, md state), md UUID, level, chunk, metadata, raid devices, how many are
# missing (degraded), filesystem and mount point. A member's slot is its RaidDevice number; a
# device that holds no working slot (a spare, one md marked faulty, one still rebuilding) has
# slot null, so that nobody takes it for a member.
# Parameter (environment): SSM_ArrayName, the array the caller looks for; arrays whose md name is
# that name (or <host>:<name>) carry "matchesArrayName": true. Last stdout line: one JSON object.
set -euo pipefail
export LC_ALL=C
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# JSON string literal for $1: backslash, quote and control characters escaped. Pure bash,
# because jq or python may be absent on the instance.
json_str() {
  local s=$1 out="" c i
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\r'/\\r}
  s=${s//$'\t'/\\t}
  if [[ $s == *[$'\x01'-$'\x1f']* ]]; then
    for ((i = 0; i < ${#s}; i++)); do
      c=${s:i:1}
      [[ $c == [$'\x01'-$'\x1f'] ]] && printf -v c '\\u%04x' "'$c"
      out+=$c
    done
    s=$out
  fi
  printf '"%s"' "$s"
}

# A JSON string, or null when $1 is empty.
json_str_or_null() {
  if [[ -n $1 ]]; then json_str "$1"; else printf 'null'; fi
}

# A JSON number, or null when $1 is not an integer.
json_int_or_null() {
  if [[ $1 =~ ^-?[0-9]+$ ]]; then printf '%s' "$1"; else printf 'null'; fi
}

say() { printf 'raidsnap: %s\n' "$*" >&2; }

# Print the error as the final JSON line and stop. Exit 2 for bad input, 1 otherwise.
fail() {
  local name=$1 message=$2 code=1
  [[ $name == InvalidInput ]] && code=2
  say "$name: $message"
  printf '{"ok":false,"error":%s,"message":%s}\n' "$(json_str "$name")" "$(json_str "$message")"
  exit "$code"
}

# Parameters were checked by the document's allowedPattern already; the script checks again so
# that a hand-run or a copy of the document without the patterns is just as safe.
require_match() { # NAME VALUE REGEX
  [[ $2 =~ $3 ]] || fail InvalidInput "$1 has an invalid value (expected ${3})"
}

require_mount_point() { # NAME VALUE
  local seg
  local -a segs
  require_match "$1" "$2" '^(/[A-Za-z0-9._-]+)+$'
  ((${#2} <= 201)) || fail InvalidInput "$1 is longer than 201 characters"
  IFS=/ read -r -a segs <<<"${2#/}"
  for seg in "${segs[@]}"; do
    [[ $seg != . && $seg != .. ]] || fail InvalidInput "$1 must not contain . or .. segments"
  done
}

# The block device of an EBS volume. Nitro: the NVMe controller serial is the volume id without
# its dash, seen as /dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_<serial> and in
# /sys/class/nvme/*/serial. Xen instances expose no volume id at all; the fallback is any
# /dev/disk/by-id link that carries the id (some images add such links), else nothing.
volume_device() {
  local vol=$1 serial=${1/-/} link c ns
  link=/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_$serial
  if [[ -b $link ]]; then
    readlink -f "$link"; return 0
  fi
  for c in /sys/class/nvme/nvme*; do
    [[ -r $c/serial ]] || continue
    [[ $(tr -d ' \n' <"$c/serial") == "$serial" ]] || continue
    for ns in "$c"/nvme*n*; do
      if [[ -b /dev/${ns##*/} ]]; then
        printf '/dev/%s\n' "${ns##*/}"; return 0
      fi
    done
  done
  for link in /dev/disk/by-id/*"$serial" /dev/disk/by-id/*"$vol"; do
    if [[ -b $link ]]; then
      readlink -f "$link"; return 0
    fi
  done
  return 0
}

# The whole disk a device belongs to (nvme1n1p1 -> nvme1n1), as a kernel name.
parent_disk() {
  local name=${1#/dev/}
  if [[ -e /sys/class/block/$name/partition ]]; then
    name=$(readlink -f "/sys/class/block/$name/..")
    name=${name##*/}
  fi
  printf '%s\n' "$name"
}

# The EBS-style serial of a device (its parent disk's NVMe serial), or nothing.
device_serial() {
  local disk link
  disk=$(parent_disk "$1")
  if [[ -r /sys/class/block/$disk/device/serial ]]; then
    tr -d ' \n' <"/sys/class/block/$disk/device/serial"; return 0
  fi
  for link in /dev/disk/by-id/*vol*; do
    [[ -e $link && $link != *-part* ]] || continue
    if [[ $(readlink -f "$link") == "/dev/$disk" ]]; then
      printf '%s\n' "${link##*/}" | grep -o 'vol-\{0,1\}[0-9a-f]\{8,17\}' | awk 'NR == 1' | tr -d -- -
      return 0
    fi
  done
  return 0
}

# vol0abc... -> vol-0abc..., nothing for a serial that is not an EBS volume id.
serial_volume_id() {
  if [[ $1 =~ ^vol([0-9a-f]{8,17})$ ]]; then printf 'vol-%s\n' "${BASH_REMATCH[1]}"; fi
}

kv() { # KEY TEXT: value of KEY=value in mdadm/blkid export output
  sed -n "s/^$1=//p" <<<"$2" | awk 'NR == 1'
}

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
