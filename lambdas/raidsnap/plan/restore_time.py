"""Restore time: how long a restored set takes to be mounted and to reach full performance for
each way of initializing its volumes, from AWS's published figures (FIGURES names each one and
its source), and which way, or per-member mix, is quickest for this set, this target and the
FSR state now. Pure: the workflow passes in what it read from EC2.

Time to full performance is when every member can serve every block at its provisioned rate:
- fsr: a volume created from a snapshot whose FSR is enabled in the AZ, with a volume creation
  credit, is fully initialized at creation. FSR enabled now is enabling, then optimizing at 60
  minutes per TiB, then its credit bucket (empty at first) needs its first credit.
- rate: EBS downloads the snapshot's blocks at the provisioned rate (100..300 MiB/s) from the
  volume's creation, whatever the instance does.
- prewarm: the instance reads every block once after the array is mounted: all members at once,
  each at most at its own throughput, together at most at the instance's EBS bandwidth (its
  maximum for 30 minutes, then its baseline).
- none: blocks are fetched as they are first read: full performance has no bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from raidsnap.models import INITIALIZATION_RATE_RANGE
from raidsnap.plan import fsr as plan_fsr
from raidsnap.text import counted

MIB_PER_MB = 1_000_000 / 1_048_576
# Instance EBS bandwidth: DescribeInstanceTypes EbsInfo.EbsOptimizedInfo Baseline- and
# MaximumThroughputInMBps (MB/s); an instance whose maximum exceeds its baseline "can support
# maximum performance for 30 minutes at least once every 24 hours" (EC2 User Guide, "Amazon
# EBS-optimized instance types").
BURST_SECONDS = 1800.0
RATE_MAX = INITIALIZATION_RATE_RANGE[1]
# Volume types whose throughput is not provisioned: what one volume can read at most (EBS User
# Guide, "Amazon EBS volume types": io2 Block Express 4,000 MiB/s, io1 1,000, gp2 250, st1 500,
# sc1 250, standard ~90).
TYPE_THROUGHPUT_MIBS = {
    "io2": 4000.0,
    "io1": 1000.0,
    "gp2": 250.0,
    "st1": 500.0,
    "sc1": 250.0,
    "standard": 90.0,
}
GP3_DEFAULT_THROUGHPUT = 125.0


@dataclass(frozen=True)
class Figure:
    name: str
    value: str
    source: str


FIGURES: tuple[Figure, ...] = (
    Figure(
        "FSR optimizing",
        "60 min per TiB of snapshot",
        'EBS User Guide, "Check the fast snapshot restore state" (optimizing)',
    ),
    Figure(
        "FSR enabling",
        f"{plan_fsr.ENABLING_SECONDS:.0f} s (assumption)",
        "AWS publishes no figure for the enabling state; raidsnap assumes a minute",
    ),
    Figure(
        "FSR credit bucket",
        "MAX(1, MIN(10, FLOOR(1024 / snapshot GiB))) credits, empty when enabled; fills at "
        "MIN(10, 1024 / snapshot GiB) credits an hour; one credit per volume",
        'EBS User Guide, "Amazon EBS fast snapshot restore volume creation credits"',
    ),
    Figure(
        "FSR quota",
        f"{plan_fsr.DEFAULT_REGION_LIMIT} snapshots per Region (adjustable)",
        f"Service Quotas {plan_fsr.QUOTA_SERVICE_CODE} {plan_fsr.QUOTA_CODE}, read at restore",
    ),
    Figure(
        "FSR volume performance",
        "full provisioned performance at creation",
        'EBS User Guide, "Amazon EBS fast snapshot restore"',
    ),
    Figure(
        "Provisioned initialization rate",
        f"{INITIALIZATION_RATE_RANGE[0]}..{RATE_MAX} MiB/s per volume, from creation; "
        "DescribeVolumeStatus InitializationStatusDetails.estimatedTimeToCompleteInSeconds",
        "EC2 API Reference, CreateVolume VolumeInitializationRate; InitializationStatusDetails",
    ),
    Figure(
        "Volume throughput",
        "gp3 125..2,000 MiB/s as provisioned; io2 4,000; io1 1,000; gp2 250; st1 500; sc1 250",
        'EC2 API Reference, CreateVolume Throughput; EBS User Guide, "Amazon EBS volume types"',
    ),
    Figure(
        "Instance EBS bandwidth",
        "baseline and maximum MB/s of the target's type; the maximum for 30 min per 24 h",
        'DescribeInstanceTypes EbsOptimizedInfo; EC2 User Guide, "EBS-optimized instance types"',
    ),
    Figure(
        "Prewarm first reads",
        "each member at its own throughput (assumption)",
        "AWS publishes no rate for first reads of blocks not yet initialized; raidsnap assumes "
        "the volume's throughput, and the prewarm's output reports the rate it measured",
    ),
)


@dataclass(frozen=True)
class FsrNow:
    """A member's snapshot's FSR in the target's AZ now: its state, and how long it has been
    in it (from EC2's EnablingTime, OptimizingTime or EnabledTime)."""

    state: str = "absent"
    in_state_seconds: float = 0.0


@dataclass(frozen=True)
class MemberShape:
    size_gib: int
    throughput_mibs: float
    fsr: FsrNow = FsrNow()


@dataclass(frozen=True)
class Bandwidth:
    """The target's EBS bandwidth in MiB/s; None where its type was not known."""

    baseline_mibs: float
    maximum_mibs: float
    instance_type: str = ""

    @classmethod
    def from_mb(cls, baseline_mb: float, maximum_mb: float, instance_type: str) -> Bandwidth:
        return cls(baseline_mb * MIB_PER_MB, maximum_mb * MIB_PER_MB, instance_type)


@dataclass(frozen=True)
class Latencies:
    """The steps to mounted besides initialization (assumptions: EC2 and SSM publish none):
    volumes created, attached, the array assembled and mounted."""

    create_s: float = 10.0
    attach_s: float = 3.0
    assemble_s: float = 5.0

    @property
    def mounted_s(self) -> float:
        return self.create_s + self.attach_s + self.assemble_s


@dataclass(frozen=True)
class Estimate:
    """One way to initialize the set: per member, and its predicted times in seconds from the
    restore's start (``full_s`` None: no bound)."""

    members: tuple[str, ...]
    fsr_wait_s: float
    mounted_s: float
    full_s: float | None
    rate: int = RATE_MAX

    @property
    def name(self) -> str:
        kinds = sorted(set(self.members))
        return kinds[0] if len(kinds) == 1 else "+".join(kinds)

    def sort_key(self) -> tuple[float, float, int, int]:
        # Quickest to full performance, then to mounted; between equals, the one that reads
        # the fewest members through the instance (a prewarm competes with the workload), then
        # the one with the fewest paid for at the rate.
        full = math.inf if self.full_s is None else self.full_s
        warm = sum(1 for m in self.members if m == "prewarm")
        paid = sum(1 for m in self.members if m == "rate")
        return (round(full), round(self.mounted_s), warm, paid)


def member_throughput(
    volume_type: str, throughput: int | None, size_gib: int = 0, iops: int | None = None
) -> float:
    """What one member can read at most in long sequential reads, MiB/s: gp3 as provisioned;
    for the others the type's most, held down by the size or IOPS it scales with (EBS User
    Guide, "Amazon EBS volume types": gp2 250 MiB/s from 334 GiB, else 128; io1/io2 256 KiB per
    provisioned IOPS; st1 250 and sc1 80 MiB/s per TiB of burst). An estimate on the safe side
    for a prewarm, whose reads these bounds cap."""
    if volume_type == "gp3":
        return float(throughput or GP3_DEFAULT_THROUGHPUT)
    most = TYPE_THROUGHPUT_MIBS.get(volume_type, GP3_DEFAULT_THROUGHPUT)
    tib = max(1, size_gib) / 1024
    if volume_type == "gp2":
        return most if size_gib >= 334 else 128.0
    if volume_type in ("io1", "io2") and iops:
        return min(most, iops * 0.25)
    if volume_type == "st1":
        return min(most, 250.0 * tib)
    if volume_type == "sc1":
        return min(most, 80.0 * tib)
    return most


def bucket_size(size_gib: int) -> int:
    return max(1, min(10, 1024 // max(1, size_gib)))


def credits_now(size_gib: int, enabled_seconds: float) -> float:
    """Credits a pair enabled this long ago has earned (it may have spent some: a volume made
    without one is found by the restore and prewarmed)."""
    earned = enabled_seconds / plan_fsr.credit_seconds(size_gib)
    return min(float(bucket_size(size_gib)), earned)


def fsr_ready_seconds(m: MemberShape) -> float:
    """From now until a volume created from the member's snapshot is fast restored."""
    st, since = m.fsr.state, m.fsr.in_state_seconds
    optimizing = m.size_gib * plan_fsr.OPTIMIZING_SECONDS_PER_GIB
    credit = plan_fsr.credit_seconds(m.size_gib)
    if st == "enabled":
        return max(0.0, credit - since) if credits_now(m.size_gib, since) < 1 else 0.0
    if st == "optimizing":
        return max(0.0, optimizing - since) + credit
    if st == "enabling":
        return max(0.0, plan_fsr.ENABLING_SECONDS - since) + optimizing + credit
    return plan_fsr.ENABLING_SECONDS + optimizing + credit


def ready_now(m: MemberShape) -> bool:
    return m.fsr.state == "enabled" and fsr_ready_seconds(m) == 0


def read_seconds(shapes: Sequence[MemberShape], bw: Bandwidth | None) -> float:
    """Reading every block of ``shapes`` once, all at once: each at its own throughput, together
    within the instance's bandwidth (its maximum for BURST_SECONDS, then its baseline)."""
    if not shapes:
        return 0.0
    total = sum(s.size_gib * 1024.0 for s in shapes)
    own = sum(s.throughput_mibs for s in shapes)
    slowest = max(s.size_gib * 1024.0 / s.throughput_mibs for s in shapes)
    if bw is None:
        return max(slowest, total / own)
    fast = min(own, bw.maximum_mibs)
    slow = min(own, bw.baseline_mibs)
    if total <= fast * BURST_SECONDS:
        seconds = total / fast
    else:
        seconds = BURST_SECONDS + (total - fast * BURST_SECONDS) / slow
    return max(slowest, seconds)


def estimate(
    members: Sequence[MemberShape],
    assignment: Sequence[str],
    bw: Bandwidth | None,
    lat: Latencies,
    rate: int = RATE_MAX,
) -> Estimate:
    """The predicted times of one assignment (a strategy per member)."""
    fsr_wait = max(
        (fsr_ready_seconds(m) for m, a in zip(members, assignment, strict=True) if a == "fsr"),
        default=0.0,
    )
    mounted = fsr_wait + lat.mounted_s
    ends = [mounted]
    for m, a in zip(members, assignment, strict=True):
        if a == "rate":
            ends.append(fsr_wait + lat.create_s + m.size_gib * 1024.0 / rate)
    warm = [m for m, a in zip(members, assignment, strict=True) if a == "prewarm"]
    if warm:
        ends.append(mounted + read_seconds(warm, bw))
    full = None if "none" in assignment else max(ends)
    return Estimate(tuple(assignment), fsr_wait, mounted, full, rate)


def candidates(
    members: Sequence[MemberShape],
    bw: Bandwidth | None,
    lat: Latencies,
    *,
    rate: int = RATE_MAX,
    allowed: Sequence[str] = ("fsr", "rate", "prewarm"),
) -> list[Estimate]:
    """Every strategy for the whole set, and the mixes worth weighing: FSR for the members
    whose FSR is usable now, and the others split between rate and prewarm (the k largest or
    smallest read on the instance)."""
    n = len(members)
    out = [estimate(members, [s] * n, bw, lat, rate) for s in allowed]
    fast = [i for i, m in enumerate(members) if ready_now(m)] if "fsr" in allowed else []
    rest = [i for i in range(n) if i not in fast]
    by_size = sorted(rest, key=lambda i: members[i].size_gib, reverse=True)
    for order in (by_size, by_size[::-1]):
        for k in range(len(order) + 1):
            warm = set(order[:k]) if "prewarm" in allowed else set()
            if "rate" not in allowed and len(warm) < len(rest):
                continue
            assignment = [
                "fsr" if i in fast else "prewarm" if i in warm else "rate" for i in range(n)
            ]
            out.append(estimate(members, assignment, bw, lat, rate))
    unique = {e.members: e for e in out}
    return sorted(unique.values(), key=Estimate.sort_key)


def choose(
    members: Sequence[MemberShape],
    bw: Bandwidth | None,
    lat: Latencies,
    *,
    rate: int = RATE_MAX,
    fsr_room: int | None = None,
    allowed: Sequence[str] = ("fsr", "rate", "prewarm"),
    fsr_limit: float | None = None,
) -> tuple[Estimate, list[Estimate]]:
    """The quickest way to full performance, and the others, quickest first. ``fsr_room``: how
    many more snapshots the Region's FSR quota takes (None: not asked); a way that would enable
    FSR for more is left out, as is one that would wait for FSR longer than ``fsr_limit``."""
    ranked = candidates(members, bw, lat, rate=rate, allowed=allowed)
    if fsr_limit is not None:
        ranked = [e for e in ranked if e.fsr_wait_s <= fsr_limit]
    if fsr_room is not None:
        ranked = [e for e in ranked if enables_fsr(members, e) <= fsr_room]
    return ranked[0], ranked[1:]


def enables_fsr(members: Sequence[MemberShape], e: Estimate) -> int:
    """How many snapshots this way would enable FSR for (pairs not on now)."""
    return sum(
        1
        for m, a in zip(members, e.members, strict=True)
        if a == "fsr" and m.fsr.state not in plan_fsr.ACTIVE
    )


def duration(seconds: float | None) -> str:
    """A person's reading of a duration: 40 s, 6.4 min, 1 h 58 min."""
    if seconds is None:
        return "no bound (blocks load as they are first read)"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes:02d} min"


def describe(e: Estimate) -> str:
    """One way, as the output names it: e.g. 'rate at 300 MiB/s for members 0-2'."""
    parts = []
    for kind in ("fsr", "rate", "prewarm", "none"):
        idx = [i for i, m in enumerate(e.members) if m == kind]
        if not idx:
            continue
        label = f"rate at {e.rate} MiB/s" if kind == "rate" else kind
        parts.append(
            label if len(idx) == len(e.members) else f"{label} for {counted('member', idx)}"
        )
    return ", ".join(parts)


def explain(best: Estimate, others: Sequence[Estimate], bw: Bandwidth | None) -> list[str]:
    """Why ``best`` was chosen: its estimate, and by how much each whole-set strategy loses."""
    where = (
        f"{bw.instance_type} ({bw.maximum_mibs:.0f} MiB/s of EBS bandwidth at most, "
        f"{bw.baseline_mibs:.0f} MiB/s after 30 min)"
        if bw is not None
        else "an instance whose EBS bandwidth is not known"
    )
    lines = [
        f"initialization auto chose {describe(best)} on {where}: mounted in about "
        f"{duration(best.mounted_s)}, full performance in about {duration(best.full_s)}"
    ]
    uniform = [e for e in others if len(set(e.members)) == 1]
    if uniform:
        lines.append(
            "the others: "
            + "; ".join(
                f"{describe(e)} {duration(e.mounted_s)} to mounted, "
                f"{duration(e.full_s)} to full performance"
                for e in uniform
            )
        )
    return lines
