#!/usr/bin/env bash
# Boot the test VM once: run WORK/scenario.sh inside it with the given disks attached as NVMe
# controllers (serial = EBS volume id without its dash), then power off.
#
#   run.sh --work DIR [--disk IMAGE:SERIAL]... [--udev] [--timeout SECONDS]
#          [--throttle-bps BYTES_PER_S --throttle-iops IOPS [--iops-size BYTES]]
#          [--instance-bps BYTES_PER_S] [--first-read-ms MS]
#
# DIR is shared read-write with the guest (mounted at /work); ssm/scripts is shared read-only
# at /opt/raidsnap/scripts. Exit status: the scenario's, 124 if the VM ran out of time, 125 if
# the scenario never reported.
#
# The EBS model (benchmarks, and tests of the model): --throttle-* cap each disk on its own,
# --iops-size counts a larger request as several operations (EBS counts SSD I/O in units of
# 256 KiB), --instance-bps caps all disks together (the instance's EBS bandwidth), and
# --first-read-ms serves the images through bench/ebs_nbd.py, where the first read of each
# 512 KiB block waits MS milliseconds (a volume restored from a snapshot fetching from S3). The
# guest can reset that server's map of read blocks and its latency through DIR/latency.ctl.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
vm="$repo/.cache/vm/current"
work="" udev=0 timeout=300 bps="" iops="" iops_size="" instance_bps="" first_read_ms="" mem=768 smp=2
disks=()
while (($#)); do
  case $1 in
    --work) work=$2; shift 2 ;;
    --disk) disks+=("$2"); shift 2 ;;
    --udev) udev=1; shift ;;
    --timeout) timeout=$2; shift 2 ;;
    --throttle-bps) bps=$2; shift 2 ;;
    --throttle-iops) iops=$2; shift 2 ;;
    --iops-size) iops_size=$2; shift 2 ;;
    --instance-bps) instance_bps=$2; shift 2 ;;
    --first-read-ms) first_read_ms=$2; shift 2 ;;
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
if [[ -z $instance_bps && -z $first_read_ms && -z $iops_size ]]; then
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
else
  # Each disk is a stack of block nodes: the image (a file, or the first-read model over NBD),
  # the volume's throttle group, then the instance's group that every disk shares.
  for v in "$bps" "$iops" "$iops_size" "$instance_bps" "$first_read_ms"; do
    [[ -z $v || $v =~ ^[0-9]+$ ]] || { echo "run.sh: throttle and latency values are integers" >&2; exit 2; }
  done
  server_pid=""
  nbd_dir=""
  # shellcheck disable=SC2329 # run by the EXIT trap
  stop_server() {
    if [[ -n $server_pid ]]; then
      kill "$server_pid" 2>/dev/null || true
      wait "$server_pid" 2>/dev/null || true
    fi
    [[ -n $nbd_dir ]] && rm -rf "$nbd_dir"
    return 0
  }
  trap stop_server EXIT
  if [[ -n $first_read_ms ]]; then
    python=python3
    [[ -x $repo/.venv/bin/python ]] && python=$repo/.venv/bin/python
    # A socket of its own in a short path (unix socket paths are limited to 107 bytes).
    nbd_dir=$(mktemp -d /tmp/raidsnap-nbd.XXXXXX)
    exports=() n=0
    for d in "${disks[@]}"; do exports+=("d$n=${d%:*}"); n=$((n + 1)); done
    rm -f "$work"/latency.{ctl,ack,ready,stats,final}
    "$python" "$repo/bench/ebs_nbd.py" --socket "$nbd_dir/nbd.sock" --control-dir "$work" \
      --latency-ms "$first_read_ms" "${exports[@]}" 2>"$work/ebs_nbd.log" &
    server_pid=$!
    for _ in $(seq 1 100); do
      [[ -f $work/latency.ready ]] && break
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.1
    done
    [[ -f $work/latency.ready ]] || { echo "run.sh: ebs_nbd.py did not start:" >&2; cat "$work/ebs_nbd.log" >&2; exit 2; }
  fi
  limits() { # BPS IOPS: a throttle group's limits, totals of reads and writes as EBS counts them
    local out="" sep=""
    [[ -n $1 ]] && { out+="\"bps-total\":$1"; sep=","; }
    [[ -n $2 ]] && { out+="$sep\"iops-total\":$2"; sep=","; }
    [[ -n $2 && -n $iops_size ]] && out+="$sep\"iops-size\":$iops_size"
    printf '{%s}' "$out"
  }
  [[ -n $instance_bps ]] &&
    args+=(-object "{\"qom-type\":\"throttle-group\",\"id\":\"instance\",\"limits\":$(limits "$instance_bps" "")}")
  n=0
  for d in "${disks[@]}"; do
    img=${d%:*} serial=${d##*:}
    if [[ -n $first_read_ms ]]; then
      args+=(-blockdev "{\"driver\":\"nbd\",\"node-name\":\"img$n\",\"export\":\"d$n\",\"server\":{\"type\":\"unix\",\"path\":\"$nbd_dir/nbd.sock\"}}")
    else
      args+=(-blockdev "{\"driver\":\"raw\",\"node-name\":\"img$n\",\"file\":{\"driver\":\"file\",\"filename\":\"$img\",\"aio\":\"threads\"}}")
    fi
    top=img$n
    if [[ -n $bps || -n $iops ]]; then
      args+=(-object "{\"qom-type\":\"throttle-group\",\"id\":\"vol$n\",\"limits\":$(limits "$bps" "$iops")}"
             -blockdev "{\"driver\":\"throttle\",\"node-name\":\"vol$n\",\"throttle-group\":\"vol$n\",\"file\":\"$top\"}")
      top=vol$n
    fi
    if [[ -n $instance_bps ]]; then
      args+=(-blockdev "{\"driver\":\"throttle\",\"node-name\":\"inst$n\",\"throttle-group\":\"instance\",\"file\":\"$top\"}")
      top=inst$n
    fi
    args+=(-device "nvme,drive=$top,serial=$serial")
    n=$((n + 1))
  done
fi

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
