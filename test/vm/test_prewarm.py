"""Scenario 7: prewarm reads every byte of every member, with fio and with dd.

The disks of the last three tests are served by the first-read model (bench/ebs_nbd.py), which
counts on the host what the guest really read: the script's own figures are checked against it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from vmlib import MIB, Boot, Commands, Disk, blank_disk, boot, new_volume_id

from conftest import ArraySet, record

pytestmark = pytest.mark.vm

BLOCK = 512 * 1024  # the model's block: an EBS snapshot block

# Guest side of the model's control file: forget every block read so far, take a new first-read
# latency (and blocks that fail to read), wait for the host to apply it, and keep the counters
# of the epoch that ended.
EPOCH = """
epoch=0
new_epoch() { # NAME_FOR_THE_ENDED_EPOCH_STATS LATENCY_MS [EXPORT:BLOCK...]
  local name=$1
  shift
  epoch=$((epoch + 1))
  echo "$epoch $*" >/work/latency.ctl
  while [ "$(cat /work/latency.ack 2>/dev/null)" != "$epoch" ]; do sleep 0.02; done
  cp /work/latency.stats "/work/stats-$name.json"
  echo 3 >/proc/sys/vm/drop_caches
}
"""

# A fio that behaves like a build without the libaio engine: the real fio, told to load an
# engine that is not there (it fails as fio does when libaio is missing). /usr/local/bin comes
# first in the PATH the script sets.
FIO_WITHOUT_LIBAIO = """
mkdir -p /usr/local/bin
cat >/usr/local/bin/fio <<'FIO'
#!/bin/bash
args=()
for a in "$@"; do
  if [ "$a" = --ioengine=libaio ]; then a=--ioengine=/nonexistent/libaio.so; fi
  args+=("$a")
done
exec /usr/bin/fio "${args[@]}"
FIO
chmod +x /usr/local/bin/fio
"""


def test_prewarm_reads_every_byte_with_fio_and_dd(
    raid10_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    disks = raid10_set.copies(tmp_path / "disks", rng)
    vols = ",".join(d.volume_id for d in disks)
    cmds = Commands()
    fast = {"RAIDSNAP_PROGRESS_SECONDS": "1"}  # the agent's own environment, passed through
    scenario = f"""
{cmds.ssm("fio", "prewarm", fast, VolumeIds=vols, Method="fio")}
{cmds.ssm("dd", "prewarm", fast, VolumeIds=vols, Method="dd")}
{cmds.ssm("auto", "prewarm", VolumeIds=vols)}
"""
    b = record("prewarm fio+dd+auto", boot(tmp_path / "vm", scenario, disks, commands=cmds))
    sizes = {d.volume_id: d.path.stat().st_size for d in disks}
    assert all(s == 64 * MIB for s in sizes.values())
    for name, method in (("fio", "fio"), ("dd", "dd"), ("auto", "fio")):
        assert b.rc_of(name) == 0, b.explain(name)
        out = b.json_of(name)
        assert out["ok"] is True and out["method"] == method
        assert out["bytes"] == sum(sizes.values()) == out["expectedBytes"]
        assert {d["volumeId"]: d["bytes"] for d in out["devices"]} == sizes
        assert out["seconds"] > 0
        mib, secs, rate = out["bytes"] / MIB, out["seconds"], out["mibPerSecond"]
        print(f"prewarm {name}: {mib:.0f} MiB in {secs}s ({rate} MiB/s)")
    assert "progress:" in b.text("fio.stderr") and "progress:" in b.text("dd.stderr")


def model_disks(work: Path, rng: random.Random, sizes: list[int]) -> list[Disk]:
    work.mkdir(parents=True, exist_ok=True)
    disks = []
    for i, size in enumerate(sizes):
        d = blank_disk(work / f"m{i}.img", 0, new_volume_id(rng))
        with d.path.open("r+b") as f:
            f.truncate(size)
        disks.append(d)
    return disks


def model_boot(
    work: Path, scenario: str, disks: list[Disk], latency_ms: int, commands: Commands
) -> Boot:
    # Disks in the given order, so that the model's exports d0, d1... are disks[0], disks[1]...
    return boot(
        work,
        EPOCH + scenario,
        disks,
        shuffle_seed=None,
        extra_args=["--first-read-ms", str(latency_ms)],
        commands=commands,
    )


def stats_of(b: Boot, name: str) -> dict[str, dict[str, int]]:
    exports: dict[str, dict[str, int]] = json.loads(b.text(f"stats-{name}.json"))["exports"]
    return exports


def test_each_method_reads_every_byte_of_every_member_exactly_once(
    tmp_path: Path, rng: random.Random
) -> None:
    """GIVEN members of different sizes, one of them not a whole number of MiB (nor of any
    reader's block size), WHEN each method prewarms them, THEN the host saw every byte of every
    member read exactly once, and the script's own count says the same."""
    sizes = [40 * MIB, 24 * MIB + 4096, 8 * MIB]
    disks = model_disks(tmp_path / "disks", rng, sizes)
    vols = ",".join(d.volume_id for d in disks)
    runs = {"fio": "fio", "dd": "dd", "auto": "auto", "psync": "fio"}
    cmds = Commands()
    fast = {"RAIDSNAP_PROGRESS_SECONDS": "1"}
    scenario = "new_epoch boot 0\n"
    for name, method in runs.items():
        if name == "psync":
            scenario += FIO_WITHOUT_LIBAIO
        scenario += cmds.ssm(name, "prewarm", fast, VolumeIds=vols, Method=method)
        scenario += f"\nnew_epoch {name} 0\n"
    b = record(
        "prewarm: bytes read once, per method",
        model_boot(tmp_path / "vm", scenario, disks, 0, cmds),
    )
    by_volume = {d.volume_id: size for d, size in zip(disks, sizes, strict=True)}
    for name, method in runs.items():
        assert b.rc_of(name) == 0, b.explain(name)
        out = b.json_of(name)
        assert out["ok"] is True, b.explain(name)
        assert out["method"] == ("fio" if method == "auto" else method)
        assert out["bytes"] == out["expectedBytes"] == sum(sizes)
        assert {d["volumeId"]: d["bytes"] for d in out["devices"]} == by_volume
        seen = stats_of(b, name)
        for i, size in enumerate(sizes):
            st = seen[f"d{i}"]
            assert st["size"] == size
            # Every block was read and no byte twice: the reads add up to the size exactly.
            assert st["fetchedBlocks"] == st["blocks"] == -(-size // BLOCK), (name, i, st)
            assert st["bytesRead"] == size, (name, i, st)
            assert st["bytesWritten"] == 0
        print(f"prewarm {name}: {out['seconds']}s, {out.get('readersPerMember')} reader(s)/member")
    assert b.json_of("psync")["engine"] == "psync"
    assert "libaio" in b.text("psync.stderr")
    assert {b.json_of(n)["engine"] for n in ("fio", "auto")} == {"libaio"}
    for name in runs:
        assert "progress:" in b.text(f"{name}.stderr"), name


def test_a_failed_or_stopped_prewarm_reports_and_leaves_nothing_running(
    tmp_path: Path, rng: random.Random
) -> None:
    """GIVEN a member with a block that cannot be read, WHEN either method prewarms, THEN the
    run fails with PrewarmFailed, naming the device and the reader's error, in its last line;
    and a prewarm stopped with TERM leaves no reader and no work directory behind.
    (The model answers EIO; QEMU's NVMe reports that as an unrecovered read error, which the
    kernel returns as ENODATA, "No data available".)"""
    disks = model_disks(tmp_path / "disks", rng, [16 * MIB, 16 * MIB])
    vols = ",".join(d.volume_id for d in disks)
    cmds = Commands()
    for m in ("fio", "dd"):
        cmds.ssm(m, "prewarm", VolumeIds=vols, Method=m)
        cmds.ssm(f"stopped-{m}", "prewarm", VolumeIds=vols, Method=m)
    scenario = f"""
dev=$(by_id {disks[1].serial})
echo "$dev" >/work/bad-device
new_epoch boot 0 d1:21
ssm fio
new_epoch fio 0 d1:21
ssm dd
new_epoch dd 0
# Stopped while it reads (every first read now waits 5 s): nothing of it may keep running.
for m in fio dd; do
  new_epoch "before-stop-$m" 5000
  ssm_start "stopped-$m"
  # Stop it once its readers run (their first reads take 5 s): TERM to the script itself.
  for _ in $(seq 1 150); do pgrep -x "$m" >/work/running-$m && break; sleep 0.2; done
  # The group leader is the script itself (sh -c runs its one command in place).
  pid=$(cat "/work/stopped-$m.pgid")
  kill -TERM "$pid"
  wait "$pid"
  echo $? >/work/stopped-$m.exit  # (no .rc: a killed run prints no last line to check)
  # In-flight reads finish before a reader can exit: give them up to 10 s.
  for _ in $(seq 1 50); do pgrep -x "$m" >/dev/null || break; sleep 0.2; done
  pgrep -x "$m" >/work/left-$m || true
  ls -d /tmp/raidsnap-prewarm.* >>/work/left-$m 2>/dev/null || true
done
new_epoch stopped 0
"""
    b = record("prewarm: a read fails", model_boot(tmp_path / "vm", scenario, disks, 0, cmds))
    bad = b.text("bad-device").strip()
    assert bad.startswith("/dev/nvme")
    for name in ("fio", "dd"):
        assert b.rc_of(name) == 1, b.explain(name)
        out = b.json_of(name)
        assert out["ok"] is False and out["error"] == "PrewarmFailed", out
        assert bad in out["message"], out["message"]
        reason = ("No data available", "Input/output error")
        assert any(r in out["message"] for r in reason), out["message"]
        # The healthy member was read in full all the same.
        assert stats_of(b, name)["d0"]["bytesRead"] == 16 * MIB
    for m in ("fio", "dd"):
        assert b.text(f"running-{m}").split(), f"{m} was not reading when it was stopped"
        assert b.text(f"stopped-{m}.exit").strip() == "143"
        assert b.text(f"left-{m}") == "", f"left behind by a stopped {m} prewarm"


def test_first_read_model_delays_only_blocks_not_read_before(
    tmp_path: Path, rng: random.Random
) -> None:
    """The model the benchmark rests on: the first read of a block waits, a read of a block
    already read does not, and a read that touches one new block waits again."""
    disks = model_disks(tmp_path / "disks", rng, [4 * MIB])
    scenario = f"""
dev=$(by_id {disks[0].serial})
new_epoch boot 400
timed() {{
  local s=$EPOCHREALTIME
  dd if="$dev" of=/dev/null bs=512K iflag=direct "$@" 2>/dev/null
  echo "$s $EPOCHREALTIME" >>/work/reads
}}
timed skip=3 count=1
timed skip=3 count=1
timed skip=3 count=2
new_epoch model 0
"""
    b = record("first-read model", model_boot(tmp_path / "vm", scenario, disks, 400, Commands()))
    assert b.rc == 0, b.text("scenario.stderr")
    reads = [
        float(e) - float(s) for s, e in (line.split() for line in b.text("reads").splitlines())
    ]
    assert len(reads) == 3
    assert reads[0] >= 0.4 and reads[2] >= 0.4, reads  # waited at least the latency
    st = stats_of(b, "model")["d0"]
    # read 1: block 3 cold; read 2: block 3 warm; read 3: block 3 warm, then block 4 cold
    assert (st["coldReads"], st["warmReads"], st["fetchedBlocks"]) == (2, 2, 2), st
    assert st["bytesRead"] == 4 * BLOCK
