#!/usr/bin/env bash
# raidsnap prewarm: read every block of every member exactly once, all members in parallel, with
# direct I/O, so that volumes restored from snapshots are fully initialized.
# Parameters (environment): SSM_VolumeIds, SSM_Method (auto|fio|dd).
#
# Why it reads the way it does: until a block of a restored volume has been read once, reading
# it fetches it from S3 first, with a far higher latency than EBS otherwise has ("Initialize
# Amazon EBS volumes", https://docs.aws.amazon.com/ebs/latest/userguide/initalize-volume.html).
# One reader with one I/O outstanding is then bound by that latency, not by the volume's
# throughput; a reader keeps up only with many I/Os in flight per volume, which is why AWS's
# example runs fio at iodepth 32 with 1 MiB blocks. Both methods here keep about 32 MiB in flight
# per member (less when memory is short):
# - fio (auto picks it when installed): one job per member, libaio, 1 MiB blocks at iodepth 32;
#   jobs as threads, without the TSC calibration and the disk statistics, which only cost start-up
#   time. Without libaio, psync jobs over disjoint ranges of each member instead.
# - dd: several dd processes per member, each reading a disjoint range with large direct reads
#   (a large direct read is split into many requests that are all in flight at once).
set -euo pipefail

# shellcheck source=lib/input.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/input.sh"
# shellcheck source=lib/devices.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/devices.sh"

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

devices=() sizes=() sector=() total=0
for vol in "${volumes[@]}"; do
  d=$(volume_device "$vol")
  [[ -n $d ]] || fail MemberMissing "no block device for $vol"
  size=$(blockdev --getsize64 "$d")
  devices+=("$d") sizes+=("$size") sector+=("$(blockdev --getss "$d")")
  total=$((total + size))
done

# Bytes in flight per member: 32 MiB, or less when 32 MiB per member would take more than a
# quarter of the available memory (the readers' buffers are that large); never under 4 MiB.
mib=1048576
depth_mib=32
avail_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo 2>/dev/null || true)
if [[ $avail_kib =~ ^[0-9]+$ ]]; then
  share=$((avail_kib / 1024 / 4 / ${#devices[@]}))
  ((share < depth_mib)) && depth_mib=$share
fi
((depth_mib >= 4)) || depth_mib=4
# dd (and fio without libaio): 4 readers per member, each with a quarter of the depth per read.
readers=4
reader_mib=$((depth_mib / readers))
range_bytes=$((reader_mib * mib))

# The ranges of device $1 for $readers readers of $range_bytes-byte reads: "SKIP COUNT" in reads,
# COUNT "-" for the last one, which reads to the end (a size that is not a whole number of reads
# ends with one short read).
ranges() {
  local size=${sizes[$1]} n per k
  n=$(((size + range_bytes - 1) / range_bytes))
  per=$(((n + readers - 1) / readers))
  for ((k = 0; k * per < n; k++)); do
    if (((k + 1) * per < n)); then echo "$((k * per)) $per"; else echo "$((k * per)) -"; fi
  done
}

work=$(mktemp -d /tmp/raidsnap-prewarm.XXXXXX)
pids=() labels=() logs=() reporter=""
# Whatever way the script ends, it leaves no reader of its own behind.
cleanup() {
  local p
  for p in "${pids[@]}" ${reporter:+"$reporter"}; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# Sectors read so far on a device, from the kernel's counters: progress for fio and dd alike.
sectors_read() { awk '{print $3}' "/sys/class/block/${1#/dev/}/stat"; }
base=()
for d in "${devices[@]}"; do base+=("$(sectors_read "$d")"); done

# The fio command line: options before the first --name apply to every job. $1: libaio or psync.
fio_args() {
  local engine=$1 i k skip count start main tail
  args=(--output-format=json --output="$work/fio.json" --readonly --direct=1 --rw=read
        --thread --clocksource=clock_gettime --disk_util=0 --invalidate=0 --eta=never)
  if [[ $engine == libaio ]]; then
    args+=(--ioengine=libaio --bs="$mib" --iodepth="$depth_mib")
    for i in "${!devices[@]}"; do
      main=$((sizes[i] / mib * mib)) tail=$((sizes[i] - sizes[i] / mib * mib))
      # fio reads whole blocks only: a last partial MiB gets a job of its own, in sectors.
      ((main == 0)) || args+=(--name="d$i" --filename="${devices[i]}" --size="$main")
      ((tail == 0)) || args+=(--name="d${i}t" --filename="${devices[i]}" --offset="$main"
                              --size="$tail" --bs="${sector[i]}" --iodepth=1)
    done
  else
    args+=(--ioengine=psync --bs="$range_bytes")
    for i in "${!devices[@]}"; do
      k=0
      while read -r skip count; do
        [[ $count != - ]] || count=$(((sizes[i] - skip * range_bytes + range_bytes - 1) / range_bytes))
        start=$((skip * range_bytes))
        main=$((count * range_bytes)) tail=0
        if ((start + main > sizes[i])); then
          main=$(((sizes[i] - start) / range_bytes * range_bytes)) tail=$((sizes[i] - start - main))
        fi
        ((main == 0)) || args+=(--name="d${i}r$k" --filename="${devices[i]}" --offset="$start" --size="$main")
        ((tail == 0)) || args+=(--name="d${i}r${k}t" --filename="${devices[i]}" --offset="$((start + main))"
                                --size="$tail" --bs="${sector[i]}")
        k=$((k + 1))
      done < <(ranges "$i")
    done
  fi
}

# fio runs as a child of this function's own process, which passes a TERM on to it.
run_fio() {
  local fpid="" rc=0
  trap '[[ -z $fpid ]] || kill "$fpid" 2>/dev/null; exit 143' TERM
  fio_args libaio
  echo libaio >"$work/engine"
  fio "${args[@]}" >"$work/fio.out" 2>&1 &
  fpid=$!
  wait "$fpid" || rc=$?
  ((rc != 0)) || return 0
  # Some builds of fio lack libaio: fio says so before reading anything; read with psync then.
  if grep -q 'failed to load engine' "$work/fio.out" && grep -q 'libaio' "$work/fio.out"; then
    say "fio cannot load libaio; reading with psync, $readers jobs per member"
    echo psync >"$work/engine"
    fio_args psync
    fio "${args[@]}" >"$work/fio.out" 2>&1 &
    fpid=$!
    rc=0
    wait "$fpid" || rc=$?
  fi
  return "$rc"
}

# The dd readers in the order they start: the first range of every member, then the second...
# so that every member is being read as early as possible (each has its own cap).
plan=()
if [[ $method == dd ]]; then
  for i in "${!devices[@]}"; do
    k=0
    while read -r skip count; do
      plan+=("$k $i $skip $count")
      k=$((k + 1))
    done < <(ranges "$i")
  done
  mapfile -t plan < <(printf '%s\n' "${plan[@]}" | sort -n -k1,1 -k2,2)
fi

say "prewarming ${#devices[@]} device(s), $((total / 1048576)) MiB, with $method"
start=$(date +%s.%N)
if [[ $method == fio ]]; then
  run_fio &
  pids+=($!) labels+=("fio") logs+=("$work/fio.out")
else
  for p in "${plan[@]}"; do
    read -r k i skip count <<<"$p"
    args=(if="${devices[i]}" of=/dev/null bs="$range_bytes" iflag=direct skip="$skip")
    [[ $count == - ]] || args+=(count="$count")
    dd "${args[@]}" 2>"$work/dd.$i.$k" &
    pids+=($!) logs+=("$work/dd.$i.$k")
    labels+=("dd of ${devices[i]} from byte $((skip * range_bytes))")
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
# Progress from a process of its own, so that the end of the reading is seen the moment it
# happens rather than at the next poll.
progress() {
  local nap=""
  trap '[[ -z $nap ]] || kill "$nap" 2>/dev/null; exit 0' TERM
  while :; do
    sleep "$progress_every" &
    nap=$!
    wait "$nap" || true
    nap=""
    report
  done
}
progress &
reporter=$!

failed=()
for k in "${!pids[@]}"; do
  rc=0
  wait "${pids[k]}" || rc=$?
  ((rc == 0)) || failed+=("$k:$rc")
done
end=$(date +%s.%N)
pids=()
kill "$reporter" 2>/dev/null || true
wait "$reporter" 2>/dev/null || true
reporter=""
seconds=$(awk -v s="$start" -v e="$end" 'BEGIN{printf "%.3f", e-s}')
if ((${#failed[@]})); then
  # Each failed reader, with the lines of its output that say what went wrong.
  message=""
  for f in "${failed[@]:0:3}"; do
    k=${f%%:*}
    why=$(grep -i -m 2 'error\|fail\|denied\|no such\|invalid' "${logs[k]}" 2>/dev/null | paste -sd' ' - || true)
    [[ -n $why ]] || why=$(tail -n 2 "${logs[k]}" 2>/dev/null | paste -sd' ' - || true)
    message+="${message:+; }${labels[k]} exited ${f#*:}: $why"
  done
  ((${#failed[@]} <= 3)) || message+="; and $((${#failed[@]} - 3)) more reader(s)"
  fail PrewarmFailed "$message"
fi
report

# Bytes as the reading tool counted them, summed per device.
read_bytes=()
for i in "${!devices[@]}"; do read_bytes[i]=0; done
engine=null depth=$depth_mib per_member=1 block=$mib
if [[ $method == fio ]]; then
  engine=$(cat "$work/engine")
  if [[ $engine == psync ]]; then depth=1 per_member=$readers block=$range_bytes; fi
  while read -r job bytes; do
    # (bytes tested first: each =~ overwrites BASH_REMATCH)
    [[ $bytes =~ ^[0-9]+$ && $job =~ ^d([0-9]+) ]] || continue
    i=${BASH_REMATCH[1]}
    read_bytes[i]=$((read_bytes[i] + bytes))
  done < <(awk '
    /"jobname"/ { gsub(/[",]/, "", $3); job = $3 }
    /"read" : \{/ { inread = 1 }
    inread && /"io_bytes"/ { gsub(/,/, "", $3); print job, $3; inread = 0 }' "$work/fio.json")
  engine=$(json_str "$engine")
else
  depth=1 per_member=$readers block=$range_bytes
  for f in "$work"/dd.*; do
    i=${f#"$work"/dd.} i=${i%%.*}
    b=$(sed -n 's/^\([0-9][0-9]*\) bytes.*/\1/p' "$f" | tail -n1)
    [[ $b =~ ^[0-9]+$ ]] && read_bytes[i]=$((read_bytes[i] + b))
  done
fi
sum=0 entries=()
for i in "${!devices[@]}"; do
  b=${read_bytes[i]}
  sum=$((sum + b))
  ((b == sizes[i])) || say "warning: ${devices[i]} read $b of ${sizes[i]} bytes"
  entries+=("$(printf '{"volumeId":%s,"device":%s,"size":%s,"bytes":%s}' "$(json_str "${volumes[i]}")" \
    "$(json_str "${devices[i]}")" "${sizes[i]}" "$b")")
done
mibps=$(awk -v b="$sum" -v s="$seconds" 'BEGIN{ if (s > 0) printf "%.1f", b / 1048576 / s; else print 0 }')
say "read $sum of $total bytes in ${seconds}s (${mibps} MiB/s)"
ok=true
((sum == total)) || ok=false
printf '{"ok":%s,"method":%s,"bytes":%s,"expectedBytes":%s,"seconds":%s,"mibPerSecond":%s,"engine":%s,"readersPerMember":%s,"blockBytes":%s,"queueDepth":%s,"devices":[%s]}\n' \
  "$ok" "$(json_str "$method")" "$sum" "$total" "$seconds" "$mibps" "$engine" "$per_member" "$block" \
  "$depth" "$(IFS=,; printf '%s' "${entries[*]}")"
$ok || exit 1
