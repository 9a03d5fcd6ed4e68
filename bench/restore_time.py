"""Restore time on the emulation: to mounted and to full performance, for each way of
initializing and for `auto`, against the restore-time model's lower bounds.

Not a test: a measurement to read. The emulation runs the real state machine and functions on
virtual time; EC2's and the instance's latencies are the model's (raidsnap.plan.restore_time):
volumes 10 s, attachments 3 s, assemble 5 s, FSR at EC2's published pace, a prewarm as long as
the model says the instance's EBS bandwidth allows. What the figures add to the model is what
the workflow itself costs: its polls, waits and steps.

- mounted: from the restore's start to the step that saw the array assembled and mounted.
- full: until every member serves every block at full performance: an FSR member at its
  creation, a member at the provisioned rate at its creation plus size / rate, prewarmed members
  when the restore saw the prewarm end.
- bound: the model's prediction for what the run used; best: the quickest way's prediction
  for the set, the instance and the FSR state. `auto` rows must come within 1.05x of best to
  full performance and 1.5x of their bound to mounted.

    .venv/bin/python bench/restore_time.py          # every row (a few minutes)
    .venv/bin/python bench/restore_time.py --quick  # 3 x 1 TiB only
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
import warnings
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import boto3

from raidsnap.plan import restore_time as model
from raidsnap_emulation.harness import Emulation, Execution
from raidsnap_emulation.world import backed_up, launch_instance, make_array, sets_of

GIB = 1024**3
SHAPES = ((3, 1024), (8, 500), (16, 2048))
TYPES = ("m7i.2xlarge", "c8i.96xlarge")
# What the restore is asked for; "auto, FSR kept" is auto with FSR kept enabled on the set.
WAYS = ("prewarm", "rate", "fsr", "auto", "auto, FSR kept")
LATENCIES = model.Latencies()
RATE = 300


@dataclass
class Row:
    shape: str
    instance: str
    asked: str
    used: str
    mounted: float
    mounted_bound: float
    full: float
    full_bound: float
    best: float


def bandwidth(instance_type: str) -> model.Bandwidth:
    info = boto3.client("ec2").describe_instance_types(InstanceTypes=[instance_type])  # type: ignore[list-item]
    ebs = info["InstanceTypes"][0]["EbsInfo"]["EbsOptimizedInfo"]
    return model.Bandwidth.from_mb(
        ebs["BaselineThroughputInMBps"], ebs["MaximumThroughputInMBps"], instance_type
    )


def seconds(at: datetime, start: datetime) -> float:
    return (at - start).total_seconds()


def mounted_at(emu: Emulation) -> datetime:
    """When the restore (the emulation's only one) saw its assemble succeed: the poll that
    reported it."""
    for i in emu.router.invocations:
        result = i.result if isinstance(i.result, dict) else {}
        if (
            i.module == "command_poll"
            and str(result.get("document", "")).endswith("-assemble")
            and result.get("status") == "success"
        ):
            return i.at
    raise RuntimeError("the restore never saw its assemble succeed")


def prewarm_seen_at(emu: Emulation) -> datetime | None:
    for i in emu.router.invocations:
        result = i.result if isinstance(i.result, dict) else {}
        if (
            i.module == "command_poll"
            and str(result.get("document", "")).endswith("-prewarm")
            and result.get("status") != "pending"
        ):
            return i.at
    return None


def full_at(
    emu: Emulation, run: Execution, size_gib: int, start: datetime, mounted: datetime
) -> datetime:
    """When the last member reached full performance, by how each was initialized."""
    ends = [mounted]
    ways = run.output["memberInitialization"]
    if "rate" in ways:
        # Every member's volume is created in one step: the last CreateVolume starts the clock.
        created = max(
            c.time
            for c in emu.double.calls
            if c.operation == "CreateVolume" and c.applied and c.time >= start
        )
        ends.append(created + timedelta(seconds=size_gib * 1024 / RATE))
    if "prewarm" in ways:
        seen = prewarm_seen_at(emu)
        if seen is None:
            raise RuntimeError("the prewarm was never seen to end")
        ends.append(seen)
    return max(ends)


def keep_fsr_enabled(emu: Emulation, zone: str) -> None:
    (set_id,) = sets_of("db1")
    ids = [str(s["SnapshotId"]) for s in sets_of("db1")[set_id]]
    ec2 = boto3.client("ec2")
    for i in range(0, len(ids), 10):
        ec2.enable_fast_snapshot_restores(
            AvailabilityZones=[zone], SourceSnapshotIds=ids[i : i + 10]
        )
    emu.double.clock.advance(2 * 86400)  # optimized long ago, buckets full


def one(members: int, size_gib: int, instance_type: str, asked: str) -> Row:
    with Emulation() as emu:
        emu.double.fsr_region_limit = 40  # a raised quota: 16 members need 16 places
        bw = bandwidth(instance_type)

        def prewarm_seconds(_instance: str, sizes: dict[str, int]) -> float:
            shapes = [model.MemberShape(round(b / GIB), 1000.0) for b in sizes.values()]
            return model.read_seconds(shapes, bw)

        emu.hosts.prewarm_seconds_for = prewarm_seconds
        fx = make_array(
            emu.hosts, "db1", members, size_gib=size_gib, unrelated=0, instance_type=instance_type
        )
        backed_up(emu.hosts, emu.run, fx)
        target = launch_instance("db1-copy", fx.availability_zone, instance_type=instance_type)
        kept = asked == "auto, FSR kept"
        if kept:
            keep_fsr_enabled(emu, fx.availability_zone)
        payload: dict[str, Any] = {"array": "db1", "targetInstanceId": target}
        if asked in ("prewarm", "rate", "fsr"):
            payload["initialization"] = asked
        if asked == "rate":
            payload["initializationRate"] = RATE
        start = emu.double.clock.now()
        run = emu.wait(emu.start("restore", payload), timeout=1800)
        if run.status != "SUCCEEDED":
            raise RuntimeError(f"{asked}: {run.error}: {run.cause}")
        mounted = mounted_at(emu)
        full = full_at(emu, run, size_gib, start, mounted)
    fsr_now = model.FsrNow("enabled", 2 * 86400) if kept else model.FsrNow()
    shapes = [model.MemberShape(size_gib, 1000.0, fsr_now) for _ in range(members)]
    used = run.output["memberInitialization"]
    mine = model.estimate(shapes, used, bw, LATENCIES)
    best, _ = model.choose(shapes, bw, LATENCIES)
    return Row(
        shape=f"{members} x {size_gib} GiB",
        instance=instance_type,
        asked=asked,
        used=model.describe(mine),
        mounted=seconds(mounted, start),
        mounted_bound=mine.mounted_s,
        full=seconds(full, start),
        full_bound=mine.full_s or 0.0,
        best=best.full_s or 0.0,
    )


def table(rows: list[Row]) -> str:
    head = (
        f"{'set':<16}{'instance':<14}{'asked':<16}{'used':<38}{'mounted':>9}{'bound':>8}"
        f"{'x':>6}{'full':>12}{'bound':>12}{'best':>12}{'x best':>8}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.shape:<16}{r.instance:<14}{r.asked:<16}{r.used[:37]:<38}"
            f"{r.mounted:>8.0f}s{r.mounted_bound:>7.0f}s{r.mounted / r.mounted_bound:>6.2f}"
            f"{model.duration(r.full):>12}{model.duration(r.full_bound):>12}"
            f"{model.duration(r.best):>12}{r.full / r.best:>8.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    shapes = SHAPES[:1] if "--quick" in argv else SHAPES
    rows = []
    for members, size in shapes:
        for instance_type in TYPES:
            for asked in WAYS:
                with contextlib.redirect_stdout(io.StringIO()):
                    rows.append(one(members, size, instance_type, asked))
                print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    print(table(rows))
    auto = [r for r in rows if r.asked.startswith("auto")]
    worst_full = max(r.full / r.best for r in auto)
    worst_mounted = max(r.mounted / r.mounted_bound for r in auto)
    print(
        f"\nauto: full performance at most {worst_full:.3f}x the best way's bound "
        f"(goal 1.05), mounted at most {worst_mounted:.2f}x its bound (goal 1.5)"
    )
    return 0 if worst_full <= 1.05 and worst_mounted <= 1.5 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
