#!/usr/bin/env bash
# Boot the test VM once: run WORK/scenario.sh inside it with the given disks attached as NVMe
# controllers (serial = EBS volume id without its dash), then power off.
#
#   run.sh --work DIR [--disk IMAGE:SERIAL]... [--udev] [--timeout SECONDS]
#          [--throttle-bps BYTES_PER_S --throttle-iops IOPS]
#
# DIR is shared read-write with the guest (mounted at /work); ssm/scripts is shared read-only
# at /opt/raidsnap/scripts. Exit status: the scenario's, 124 if the VM ran out of time, 125 if
# the scenario never reported.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
vm="$repo/.cache/vm/current"
work="" udev=0 timeout=300 bps="" iops="" mem=768 smp=2
disks=()
while (($#)); do
  case $1 in
    --work) work=$2; shift 2 ;;
    --disk) disks+=("$2"); shift 2 ;;
    --udev) udev=1; shift ;;
    --timeout) timeout=$2; shift 2 ;;
    --throttle-bps) bps=$2; shift 2 ;;
    --throttle-iops) iops=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n $work && -f $work/scenario.sh ]] || { echo "run.sh: --work DIR with scenario.sh required" >&2; exit 2; }
[[ -f $vm/initrd.cpio ]] || { echo "run.sh: run scripts/vm/ensure.sh first" >&2; exit 2; }
work=$(cd "$work" && pwd)
rm -f "$work/scenario.rc"

args=(-accel "tcg,thread=multi" -cpu max -smp "$smp" -m "$mem" -M q35
      -nographic -no-reboot -nic none -monitor none -serial "file:$work/console.log"
      -kernel "$vm/vmlinuz" -initrd "$vm/initrd.cpio"
      -append "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init raidsnap.disks=${#disks[@]} raidsnap.udev=$udev"
      -virtfs "local,path=$repo/ssm/scripts,mount_tag=scripts,security_model=none,readonly=on,id=scripts"
      -virtfs "local,path=$work,mount_tag=work,security_model=none,id=work")
throttle=""
[[ -n $bps ]] && throttle+=",throttling.bps-read=$bps,throttling.bps-write=$bps"
[[ -n $iops ]] && throttle+=",throttling.iops-read=$iops,throttling.iops-write=$iops"
n=0
for d in "${disks[@]}"; do
  img=${d%:*} serial=${d##*:}
  args+=(-drive "file=$img,if=none,id=d$n,format=raw,cache=writeback,aio=threads$throttle"
         -device "nvme,drive=d$n,serial=$serial")
  n=$((n + 1))
done

start=$(date +%s.%N)
rc=0
timeout --signal=KILL "$timeout" qemu-system-x86_64 "${args[@]}" </dev/null >"$work/qemu.log" 2>&1 || rc=$?
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" 'BEGIN{printf "%.2f\n", e-s}' >"$work/vm-seconds"
if [[ ! -f $work/scenario.rc ]]; then
  echo "run.sh: scenario did not report (qemu exit $rc); console:" >&2
  tail -n 30 "$work/console.log" >&2 || true
  [[ $rc -eq 137 ]] && exit 124
  exit 125
fi
exit "$(cat "$work/scenario.rc")"
