#!/usr/bin/env bash
# Benchmark (not a test): how close does prewarm get to the volumes' throughput cap?
# Boots the test VM with QEMU block throttling that mimics gp3 limits scaled down (default:
# 125 MiB/s and 3000 IOPS per volume, divided by SCALE=5), builds a RAID 0 over the disks, then
# measures prewarm (fio and dd methods, every member in parallel, direct I/O) against the cap
# and against a buffered `dd` of /dev/md0.
#   bench/prewarm.sh [DISKS=3] [SIZE_MIB=128] [SCALE=5]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
disks=${1:-3} size_mib=${2:-128} scale=${3:-5}
bps=$((125 * 1048576 / scale)) iops=$((3000 / scale))

bash "$repo/scripts/vm/ensure.sh" >/dev/null 2>&1
work=$(mktemp -d /tmp/raidsnap-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
args=() vols=() devs=()
for i in $(seq 0 $((disks - 1))); do
  vol=$(printf 'vol-0%016x' $((0xbe0c0000 + i)))
  truncate -s "${size_mib}M" "$work/d$i.img"
  args+=(--disk "$work/d$i.img:${vol/-/}")
  vols+=("$vol") devs+=("/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_${vol/-/}")
done
csv=$(IFS=,; echo "${vols[*]}")
cat >"$work/scenario.sh" <<SCENARIO
set -u
S=\$RAIDSNAP_SCRIPTS
mdadm --create /dev/md0 --run --assume-clean --level=0 --chunk=512 --raid-devices=$disks ${devs[*]} 2>/dev/null
for m in fio dd; do
  echo 3 >/proc/sys/vm/drop_caches
  SSM_VolumeIds=$csv SSM_Method=\$m bash \$S/prewarm.sh >/work/prewarm-\$m.out 2>/work/prewarm-\$m.err
done
echo 3 >/proc/sys/vm/drop_caches
s=\$(date +%s.%N); dd if=/dev/md0 of=/dev/null bs=1M status=none; e=\$(date +%s.%N)
echo "\$s \$e \$(blockdev --getsize64 /dev/md0)" >/work/dd-md0
mdadm --stop /dev/md0
SCENARIO
bash "$repo/scripts/vm/run.sh" --work "$work" "${args[@]}" --throttle-bps "$bps" --throttle-iops "$iops" --timeout 900

field() { sed -e "s/,\"devices\".*//" "$2" | tail -n1 | sed -n "s/.*\"$1\":\\([0-9.]*\\).*/\\1/p"; }
read -r s e md_bytes <"$work/dd-md0"
dd_mibps=$(awk -v b="$md_bytes" -v s="$s" -v e="$e" 'BEGIN{printf "%.1f", b/1048576/(e-s)}')
cap_disk=$(awk -v b="$bps" 'BEGIN{printf "%.1f", b/1048576}')
cap_all=$(awk -v b="$bps" -v n="$disks" 'BEGIN{printf "%.1f", n*b/1048576}')
printf 'disks: %s x %s MiB, throttled to %s MiB/s and %s IOPS each (gp3 125 MiB/s, 3000 IOPS / %s)\n' \
  "$disks" "$size_mib" "$cap_disk" "$iops" "$scale"
printf '%-28s %10s\n' "per-disk cap (MiB/s)" "$cap_disk" "aggregate cap (MiB/s)" "$cap_all"
for m in fio dd; do
  p=$(field mibPerSecond "$work/prewarm-$m.out")
  printf '%-28s %10s   bytes=%s seconds=%s\n' "prewarm $m (MiB/s)" "$p" \
    "$(field bytes "$work/prewarm-$m.out")" "$(field seconds "$work/prewarm-$m.out")"
  printf '%-28s %10s\n' "  ratio prewarm/cap" "$(awk -v p="$p" -v c="$cap_all" 'BEGIN{printf "%.2f", p/c}')"
  printf '%-28s %10s\n' "  ratio prewarm/buffered dd" "$(awk -v p="$p" -v d="$dd_mibps" 'BEGIN{printf "%.2f", p/d}')"
done
printf '%-28s %10s\n' "buffered dd /dev/md0 (MiB/s)" "$dd_mibps"
