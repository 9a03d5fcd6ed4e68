"""A restore looks at its prewarm when it is predicted to end (the restore-time model's read of
the members within the instance's EBS bandwidth), then every 15 s, then less often the later the
prewarm runs past that: it is seen done within 15 s of an end near the prediction, within a
quarter of its lateness after an end far past it, and never more than 5 minutes late. Before the
predicted end the looks stay at most 5 minutes apart, so a prewarm that reads faster than
predicted is seen no later than with a fixed 5-minute cadence."""

from __future__ import annotations

import itertools
import math
from datetime import datetime

from raidsnap.plan.restore_time import Bandwidth, MemberShape, read_seconds
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import backed_up, make_array

# Members of at least 293 GiB were looked at every 5 minutes (a quarter of the predicted time,
# at most 300 s), whatever the prediction.
SIZE_GIB = 300
# 3 x 300 GiB at 1,000 MiB/s each on an r6i.2xlarge (1,250 MB/s of EBS bandwidth at most,
# DescribeInstanceTypes): about 773 s; the pace per member that prediction stands for.
PREDICTED = read_seconds(
    [MemberShape(SIZE_GIB, 1000.0)] * 3, Bandwidth.from_mb(312.5, 1250.0, "r6i.2xlarge")
)
PREWARM_MIB_PER_SECOND = SIZE_GIB * 1024 / PREDICTED


def _prewarm(emu: Emulation, pace: float) -> tuple[float, list[float]]:
    """Restore db1 (3 x 300 GiB) with a prewarm that reads at ``pace`` MiB/s; the seconds from
    sending the prewarm to its end, and to each look at it."""
    fx = make_array(emu.hosts, "db1", 3, size_gib=SIZE_GIB)
    backed_up(emu.hosts, emu.run, fx)
    emu.hosts.prewarm_mib_per_second = pace
    mark = len(emu.double.calls)
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "prewarm"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["prewarm"]["status"] == "success", run.output
    (sent,) = [
        c.time
        for c in emu.double.calls[mark:]
        if c.operation == "SendCommand" and str(c.params["DocumentName"]).endswith("-prewarm")
    ]
    looks = [
        _after(sent, i.at)
        for i in emu.router.invocations
        if i.module == "command_poll" and i.at > sent
    ]
    return SIZE_GIB * 1024 / pace, looks


def _after(start: datetime, then: datetime) -> float:
    return (then - start).total_seconds()


def test_a_prewarm_that_ends_just_after_its_predicted_end_is_seen_within_15_s(
    emu: Emulation,
) -> None:
    # GIVEN a prewarm that reads a little slower than assumed (it ends 24 s after the prediction)
    ended, looks = _prewarm(emu, PREWARM_MIB_PER_SECOND * 0.97)
    # THEN one look falls on the predicted end, and the one that sees it done comes within 15 s
    assert math.ceil(PREDICTED) in [round(t) for t in looks], looks
    assert 0 <= looks[-1] - ended <= 15, (ended, looks)
    # AND the looks before the predicted end are at most 5 minutes apart
    waits = [b - a for a, b in zip([0.0, *looks], looks, strict=False)]
    assert max(waits) <= 300, waits


def test_a_prewarm_faster_than_assumed_is_seen_within_5_minutes(emu: Emulation) -> None:
    # GIVEN a prewarm that ends well before its prediction: each member read at 1,000 MiB/s,
    # about 2.5 times the predicted pace. The emulated instance reads no faster than its EBS
    # bandwidth (as on AWS), so the early end is given as a measured duration would be.
    emu.hosts.prewarm_seconds_for = lambda _instance, sizes: max(sizes.values()) / 1000.0 / 1024**2
    ended, looks = _prewarm(emu, 1000.0)
    # THEN it is seen done within 5 minutes of its end, long before the predicted end
    assert 0 <= looks[-1] - ended <= 300, (ended, looks)
    assert looks[-1] < PREDICTED


def test_a_prewarm_far_slower_than_assumed_is_seen_within_a_quarter_of_its_lateness(
    emu: Emulation,
) -> None:
    # GIVEN a prewarm that reads at a quarter of the predicted pace (it ends 39 minutes late)
    ended, looks = _prewarm(emu, PREWARM_MIB_PER_SECOND / 4)
    late = ended - PREDICTED
    # THEN it is seen done within a quarter of its lateness, and within 5 minutes
    assert 0 <= looks[-1] - ended <= min(300, max(15, late / 4)), (ended, looks)
    # AND after the predicted end each wait is at most a quarter of how late the prewarm is
    # then (15 s at least, 5 minutes at most), so the 39 minutes late cost far fewer looks than
    # a look every 15 s would (206): not a quarter of them
    for before, after in itertools.pairwise(looks):
        if before >= PREDICTED:
            assert after - before <= min(300, max(15, (before - PREDICTED) / 4) + 1), looks
    assert len(looks) <= ended / 15 / 4, len(looks)
