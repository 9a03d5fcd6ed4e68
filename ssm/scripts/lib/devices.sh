# shellcheck shell=bash
# lib/devices.sh: EBS volumes as block devices, and the export format of mdadm and blkid.

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
