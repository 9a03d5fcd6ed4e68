#!/usr/bin/env bash
# Benchmark (not a test): how close does prewarm get to the throughput ceiling of the members,
# and how much faster is it than the runbooks' buffered `dd if=/dev/md0 bs=1M`?
#
#   bench/prewarm.sh [DISKS=3] [SIZE_MIB=640] [SCALE=5] [LATENCY_MS=35] [INSTANCE_MIBPS=400]
#
# One boot of the test VM, a RAID 0 (512 KiB chunks) over DISKS members, then every reader
# (prewarm with Method=fio, dd and auto, and the buffered dd of /dev/md0) on cold volumes in two
# models of EBS, side by side:
#
# - throughput-capped: each member is capped like a gp3 volume at its baseline, 125 MiB/s and
#   3,000 IOPS, counted as EBS counts SSD I/O (a request is one operation per 256 KiB: "Amazon
#   EBS I/O characteristics", https://docs.aws.amazon.com/ebs/latest/userguide/
#   ebs-io-characteristics.html); all members together are capped by the instance's EBS
#   bandwidth, INSTANCE_MIBPS (default 300, below the 375 of three gp3 volumes: "it is still
#   possible to provision EBS volumes that exceed the available bandwidth for certain instance
#   types, especially when multiple volumes are striped in a RAID configuration",
#   https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ebs-ec2-config.html; 0 = no such cap).
#   The ceiling is min(sum of member caps, instance cap).
# - first-read latency: the same caps, and the first read of each 512 KiB block (the snapshot
#   block size: https://docs.aws.amazon.com/ebs/latest/userguide/ebsapi-elements.html) waits
#   LATENCY_MS x SCALE, as a block of a volume restored from a snapshot is fetched from S3 on
#   first access ("significant increase in latency when you first access each block",
#   https://docs.aws.amazon.com/ebs/latest/userguide/initalize-volume.html); a re-read is fast;
#   requests in flight overlap (bench/ebs_nbd.py serves the disks; QEMU throttles on top).
#
# Scaling. Emulation (TCG, no KVM) cannot move 375 MiB/s, so every rate is divided by SCALE.
# What makes a reader latency-bound is how many bytes it must keep in flight to reach the cap,
# bandwidth x latency; to keep that number what it is on EBS, the latency is multiplied by the
# same SCALE: 125 MiB/s x 35 ms = 25 MiB/s x 175 ms = 4.4 MiB per volume. AWS publishes no
# figure for the first-read latency, only "significant"; EBS is otherwise "designed to deliver
# single digit millisecond latency" (https://aws.amazon.com/blogs/storage/
# addressing-i-o-latency-when-restoring-amazon-ebs-volumes-from-ebs-snapshots/), and 35 ms is
# the order of what users report seeing during lazy loading (for example "the I/O latency in
# CloudWatch was around 35ms", https://blog.bitfoo.de/posts/aws-ebs-snapshot-s3-lazy-loading,
# an average that includes reads of blocks already fetched) and of S3's own latency for objects
# of a block's size ("small requests (for example, less than 512 KB)" have "median latencies
# ... in the tens of milliseconds range", https://docs.aws.amazon.com/whitepapers/latest/
# s3-optimizing-performance-best-practices/timeouts-and-retries-for-latency-sensitive-
# applications.html). It is the low end of that range, so this model understates, not
# overstates, what a deep queue gains. A single dd with 1 MiB direct reads keeps 1 MiB in
# flight: about a quarter of a member's cap here. A buffered dd of /dev/md0 keeps the array's
# readahead in flight, which md sets to two full stripes (3 MiB for 3 x 512 KiB chunks; printed
# below), so it reaches about a third of the sum of the members' caps.
#
# Sizes: under emulation a reader takes 1-1.5 s to get going (fio's start: the emulator
# translating fio's code as it first runs, where an instance takes some 20 ms; a dozen dd
# processes), so the members must take well over 10 s to read at the ceiling for that not to
# dominate: 3 x 640 MiB at 75 MiB/s is about 26 s per reader. A run takes about 5 minutes; the
# machine's other load shows in the figures (a starved emulator completes I/O late).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
disks=${1:-3} size_mib=${2:-640} scale=${3:-5} latency_ms=${4:-35} instance_mibps=${5:-400}
for v in "$disks" "$size_mib" "$scale" "$latency_ms" "$instance_mibps"; do
  [[ $v =~ ^[0-9]+$ ]] || { echo "usage: bench/prewarm.sh [DISKS] [SIZE_MIB] [SCALE] [LATENCY_MS] [INSTANCE_MIBPS]" >&2; exit 2; }
done
((disks >= 2 && size_mib >= 16 && scale >= 1)) || { echo "bench/prewarm.sh: at least 2 disks of 16 MiB, SCALE >= 1" >&2; exit 2; }
bps=$((125 * 1048576 / scale)) iops=$((3000 / scale))
instance_bps=$((instance_mibps * 1048576 / scale))
model_ms=$((latency_ms * scale))

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
((instance_mibps == 0)) || args+=(--instance-bps "$instance_bps")
csv=$(IFS=,; echo "${vols[*]}")
# The script as the deployed document carries it (its libraries inlined), not ssm/scripts itself.
PYTHONPATH="$repo/lambdas:$repo/emulation" "$repo/.venv/bin/python" - "$work/prewarm.sh" <<'RENDER'
import json
import sys

from raidsnap_emulation.harness import synthesize
from raidsnap_emulation.ssm_agent import documents_in_template

(step,) = documents_in_template(json.loads(synthesize().read_text()))["prewarm"]["mainSteps"]
with open(sys.argv[1], "w") as f:
    f.write("\n".join(step["inputs"]["runCommand"]) + "\n")
RENDER

cat >"$work/scenario.sh" <<SCENARIO
set -u
epoch=0
# Forget every block read so far (the volumes are cold again), with this first-read latency.
cold() {
  epoch=\$((epoch + 1))
  echo "\$epoch \$1" >/work/latency.ctl
  while [ "\$(cat /work/latency.ack 2>/dev/null)" != "\$epoch" ]; do sleep 0.02; done
  [ -z "\${2:-}" ] || cp /work/latency.stats "/work/stats-\$2.json"
  echo 3 >/proc/sys/vm/drop_caches
}
mdadm --create /dev/md0 --run --assume-clean --level=0 --chunk=512 --raid-devices=$disks ${devs[*]} 2>/dev/null
blockdev --getsize64 /dev/md0 >/work/md0-bytes
cat /sys/block/md0/queue/read_ahead_kb >/work/md0-readahead
last=""
for model in throughput:0 latency:$model_ms; do
  name=\${model%%:*} ms=\${model#*:}
  for m in fio dd auto; do
    cold "\$ms" \$last
    SSM_VolumeIds=$csv SSM_Method=\$m bash /work/prewarm.sh >/work/\$name-\$m.out 2>/work/\$name-\$m.err
    last=\$name-\$m
  done
  cold "\$ms" \$last
  s=\$EPOCHREALTIME; dd if=/dev/md0 of=/dev/null bs=1M status=none; e=\$EPOCHREALTIME
  echo "\$s \$e" >/work/\$name-md0.time
  last=\$name-md0
done
cold 0 \$last
mdadm --stop /dev/md0
SCENARIO
started=$(date +%s)
bash "$repo/scripts/vm/run.sh" --work "$work" "${args[@]}" --throttle-bps "$bps" --throttle-iops "$iops" \
  --iops-size 262144 --first-read-ms 0 --timeout 1800 >/dev/null
elapsed=$(($(date +%s) - started))

python3 - "$work" "$disks" "$size_mib" "$scale" "$bps" "$iops" "$instance_bps" "$model_ms" "$elapsed" <<'REPORT'
import json
import sys
from pathlib import Path

work = Path(sys.argv[1])
disks, size_mib, scale, bps, iops, instance_bps, model_ms, elapsed = map(int, sys.argv[2:])
mib = 1048576
cap = bps / mib
instance = instance_bps / mib if instance_bps else float("inf")
ceiling = min(disks * cap, instance)
md0 = int((work / "md0-bytes").read_text())
readahead = (work / "md0-readahead").read_text().strip()
inst = f"{instance:.1f} MiB/s" if instance_bps else "none"
print(f"disks: {disks} x {size_mib} MiB, each {cap:.1f} MiB/s and {iops} IOPS of 256 KiB "
      f"(gp3 125 MiB/s, 3000 IOPS / {scale}); instance: {inst}")
print(f"ceiling min({disks} x {cap:.1f}, {inst}) = {ceiling:.1f} MiB/s; "
      f"first-read latency in the latency model: {model_ms} ms; VM run {elapsed} s")
print(f"/dev/md0: RAID 0, 512 KiB chunks, readahead {readahead} KiB")


def stats(run: str) -> int:
    """Bytes the host served during a run (the next epoch's stats file holds them)."""
    p = work / f"stats-{run}.json"
    if not p.exists():
        return -1
    return sum(e["bytesRead"] for e in json.loads(p.read_text())["exports"].values())


rows: dict[str, dict[str, tuple[float, str]]] = {}
for model in ("throughput", "latency"):
    t = (work / f"{model}-md0.time").read_text().split()
    dd_rate = md0 / mib / (float(t[1]) - float(t[0]))
    rows.setdefault("buffered dd /dev/md0", {})[model] = (dd_rate, f"host read {stats(model + '-md0') / mib:.0f} MiB")
    for m in ("fio", "dd", "auto"):
        lines = (work / f"{model}-{m}.out").read_text().strip().splitlines()
        out = json.loads(lines[-1]) if lines else {"ok": False}
        label = f"prewarm {m}" + (f" ({out['method']})" if m == "auto" and out.get("ok") else "")
        if not out.get("ok"):
            err = (work / f"{model}-{m}.err").read_text()[-300:]
            rows.setdefault(label, {})[model] = (float("nan"), f"FAILED: {out} {err}")
            continue
        note = (f"{out['bytes'] / mib:.0f} MiB in {out['seconds']} s, {out['readersPerMember']} x "
                f"{out['blockBytes'] // 1024} KiB x depth {out['queueDepth']} per member; "
                f"host read {stats(f'{model}-{m}') / mib:.0f} MiB")
        rows.setdefault(label, {})[model] = (float(out["mibPerSecond"]), note)
dd = {m: rows["buffered dd /dev/md0"][m][0] for m in ("throughput", "latency")}
order = [k for k in rows if k.startswith("prewarm")] + ["buffered dd /dev/md0"]
print()
print(f"{'':24}{'throughput-capped':>28}   {'first-read latency ' + str(model_ms) + ' ms':>30}")
print(f"{'reader':24}{'MiB/s':>10}{'/ceiling':>9}{'/buf dd':>9}   {'MiB/s':>12}{'/ceiling':>9}{'/buf dd':>9}")
for k in order:
    cells = []
    for m in ("throughput", "latency"):
        rate = rows[k][m][0]
        cells.append(f"{rate:10.1f}{rate / ceiling:9.2f}{rate / dd[m]:9.2f}")
    print(f"{k:24}{cells[0]}   {'':2}{cells[1]}")
print()
for k in order:
    for m in ("throughput", "latency"):
        print(f"  {k}, {m}: {rows[k][m][1]}")
REPORT
