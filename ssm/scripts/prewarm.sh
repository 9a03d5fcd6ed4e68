#!/usr/bin/env bash
# raidsnap prewarm: read every block of every member once, all members in parallel, with direct
# I/O, so that volumes restored from snapshots are fully initialized. fio when present, else dd.
# Parameters (environment): SSM_VolumeIds, SSM_Method (auto|fio|dd).
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

# Unset: the document's default (a hand-run). Set but empty: refused like any other value that no
# pattern admits, so a blank Method never turns into auto.
volume_csv=${SSM_VolumeIds:-}
method=${SSM_Method-auto}
require_match VolumeIds "$volume_csv" '^vol-[0-9a-f]{8,17}(,vol-[0-9a-f]{8,17}){0,39}$'
require_match Method "$method" '^(auto|fio|dd)$'
progress_every=${RAIDSNAP_PROGRESS_SECONDS:-10}
[[ $progress_every =~ ^[1-9][0-9]{0,3}$ ]] || fail InvalidInput "RAIDSNAP_PROGRESS_SECONDS must be a number"
IFS=, read -r -a volumes <<<"$volume_csv"

if [[ $method == auto ]]; then
  if command -v fio >/dev/null; then method="fio"; else method="dd"; fi
fi
[[ $method != fio ]] || command -v fio >/dev/null || fail ToolMissing "fio is not installed (use Method=dd or auto)"
command -v blockdev >/dev/null || fail ToolMissing "blockdev (util-linux) is not installed"

devices=() sizes=() total=0
for vol in "${volumes[@]}"; do
  d=$(volume_device "$vol")
  [[ -n $d ]] || fail MemberMissing "no block device for $vol"
  size=$(blockdev --getsize64 "$d")
  devices+=("$d") sizes+=("$size")
  total=$((total + size))
done

work=$(mktemp -d /tmp/raidsnap-prewarm.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Sectors read so far on a device, from the kernel's counters: progress for fio and dd alike.
sectors_read() { awk '{print $3}' "/sys/class/block/${1#/dev/}/stat"; }
base=()
for d in "${devices[@]}"; do base+=("$(sectors_read "$d")"); done

say "prewarming ${#devices[@]} device(s), $((total / 1048576)) MiB, with $method"
start=$(date +%s.%N)
pids=()
if [[ $method == fio ]]; then
  engine=psync
  engines=$(fio --enghelp 2>/dev/null || true)
  [[ $'\n'$engines$'\n' =~ [[:space:]]libaio[[:space:]] ]] && engine=libaio
  args=(--output-format=json --output="$work/fio.json" --readonly --direct=1 --rw=read --bs=1M
        --iodepth=32 --ioengine="$engine" --group_reporting=0)
  for i in "${!devices[@]}"; do
    args+=(--name="d$i" --filename="${devices[i]}")
  done
  fio "${args[@]}" >"$work/fio.out" 2>&1 &
  pids+=($!)
else
  for i in "${!devices[@]}"; do
    dd if="${devices[i]}" of=/dev/null bs=1M iflag=direct 2>"$work/dd.$i" &
    pids+=($!)
  done
fi

report() {
  local i line=""
  for i in "${!devices[@]}"; do
    local done_bytes=$((($(sectors_read "${devices[i]}") - base[i]) * 512))
    ((done_bytes > sizes[i])) && done_bytes=${sizes[i]}
    line+=" ${devices[i]##*/} $((done_bytes / 1048576))/$((sizes[i] / 1048576))MiB"
  done
  say "progress:$line"
}
last=$SECONDS
while :; do
  running=0
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && running=1; done
  ((running)) || break
  if ((SECONDS - last >= progress_every)); then report; last=$SECONDS; fi
  sleep 1
done
rcs=0
for p in "${pids[@]}"; do wait "$p" || rcs=$?; done
end=$(date +%s.%N)
seconds=$(awk -v s="$start" -v e="$end" 'BEGIN{printf "%.3f", e-s}')
((rcs == 0)) || fail PrewarmFailed "$method exited $rcs: $(tail -n 3 "$work"/fio.out "$work"/dd.* 2>/dev/null | paste -sd' ' -)"
report

# Bytes as the reading tool counted them.
read_bytes=()
if [[ $method == fio ]]; then
  while read -r job bytes; do
    read_bytes[${job#d}]=$bytes
  done < <(awk '
    /"jobname"/ { gsub(/[",]/, "", $3); job = $3 }
    /"read" : \{/ { inread = 1 }
    inread && /"io_bytes"/ { gsub(/,/, "", $3); print job, $3; inread = 0 }' "$work/fio.json")
else
  for i in "${!devices[@]}"; do
    read_bytes[i]=$(sed -n 's/^\([0-9][0-9]*\) bytes.*/\1/p' "$work/dd.$i" | tail -n1)
  done
fi
sum=0 entries=()
for i in "${!devices[@]}"; do
  b=${read_bytes[i]:-0}
  [[ $b =~ ^[0-9]+$ ]] || b=0
  sum=$((sum + b))
  ((b == sizes[i])) || say "warning: ${devices[i]} read $b of ${sizes[i]} bytes"
  entries+=("$(printf '{"volumeId":%s,"device":%s,"size":%s,"bytes":%s}' "$(json_str "${volumes[i]}")" \
    "$(json_str "${devices[i]}")" "${sizes[i]}" "$b")")
done
mibps=$(awk -v b="$sum" -v s="$seconds" 'BEGIN{ if (s > 0) printf "%.1f", b / 1048576 / s; else print 0 }')
say "read $sum of $total bytes in ${seconds}s (${mibps} MiB/s)"
ok=true
((sum == total)) || ok=false
printf '{"ok":%s,"method":%s,"bytes":%s,"expectedBytes":%s,"seconds":%s,"mibPerSecond":%s,"devices":[%s]}\n' \
  "$ok" "$(json_str "$method")" "$sum" "$total" "$seconds" "$mibps" "$(IFS=,; printf '%s' "${entries[*]}")"
$ok || exit 1
