"""The demo's timeline folds a run of looks told alike into one line whose count and times come
from the invocations themselves, and puts the mount on a line of its own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from raidsnap_emulation.demo_timeline import folded, timeline
from raidsnap_emulation.harness import Invocation

START = datetime(2026, 11, 26, 3, 0, tzinfo=UTC)


def poll(seconds: int, status: str, **result: Any) -> Invocation:
    return Invocation(
        function="raidsnap-command-poll",
        module="command_poll",
        at=START + timedelta(seconds=seconds),
        event={},
        result={"document": "raidsnap-prewarm", "instanceId": "i-1", "status": status, **result},
    )


def test_looks_told_alike_are_one_line_with_their_count_and_times() -> None:
    looks = [poll(s, "pending", predictedSeconds=83) for s in (103, 118, 545)]
    failed = poll(653, "failed", stderrTail="PrewarmFailed", waitedSeconds=633)
    told = folded([*looks, failed], START)
    assert [(t.at, t.looks, t.last) for t in told] == [(103, 3, 545), (653, 1, 653)]
    (first, last) = list(timeline([*looks, failed], START))
    assert "looked 3 times, +01:43 → +09:05" in first
    assert "looked" not in last and "failed after 10 min 33 s" in last


def test_looks_told_differently_stay_apart() -> None:
    told = folded([poll(10, "pending", predictedSeconds=60), poll(20, "pending")], START)
    assert [t.looks for t in told] == [1, 1]


def test_the_mount_is_a_line_of_its_own() -> None:
    assembled = Invocation(
        function="raidsnap-command-poll",
        module="command_poll",
        at=START + timedelta(seconds=23),
        event={},
        result={
            "document": "raidsnap-assemble",
            "status": "success",
            "result": {"mdDevice": "/dev/md0", "mountPoint": "/data", "members": [{}, {}]},
        },
    )
    lines = list(timeline([assembled], START))
    assert len(lines) == 2
    assert "ARRAY MOUNTED at /data — usable now" in lines[1] and "+00:23" in lines[1]
