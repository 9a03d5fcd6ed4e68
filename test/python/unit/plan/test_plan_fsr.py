"""plan.fsr: the FSR policy of a restore, without EC2."""

from __future__ import annotations

from typing import Any

import pytest

from raidsnap.plan import fsr
from raidsnap.plan.fsr import PairState, RegionLimit, Verdict

HOUR = 3600.0


def members(*sizes: int) -> list[dict[str, Any]]:
    return [{"snapshotId": f"snap-{i}", "sizeGib": size} for i, size in enumerate(sizes)]


def test_pairs_by_zone_and_in_one_zone() -> None:
    pairs = ["snap-a@az1", "snap-b@az2", "snap-c@az1", "snap-a@az1"]
    assert fsr.by_zone(pairs) == {"az1": ["snap-a", "snap-c", "snap-a"], "az2": ["snap-b"]}
    assert fsr.in_zone(pairs, "az1") == ["snap-a", "snap-c"]
    assert fsr.in_zone(pairs, "az3") == []
    assert fsr.pair_key("snap-a", "az1") == "snap-a@az1"


def test_billed_and_usable_states() -> None:
    assert [s for s in ("enabling", "optimizing", "enabled", "disabling") if fsr.active(s)] == [
        "enabling",
        "optimizing",
        "enabled",
    ]
    assert fsr.usable("enabled", allow_optimizing=False)
    assert not fsr.usable("optimizing", allow_optimizing=False)
    assert fsr.usable("optimizing", allow_optimizing=True)
    assert not fsr.usable("enabling", allow_optimizing=True)


def test_calls_name_at_most_ten_snapshots() -> None:
    ids = [f"snap-{i}" for i in range(23)]
    assert [len(b) for b in fsr.batches(ids)] == [10, 10, 3]
    assert [i for batch in fsr.batches(ids) for i in batch] == ids
    assert fsr.batches([]) == []


def test_credit_and_pace() -> None:
    # a 1 TiB snapshot earns one credit an hour; small ones at most ten an hour
    assert fsr.credit_seconds(1024) == HOUR
    assert fsr.credit_seconds(8) == HOUR / 10
    assert fsr.credit_seconds(0) == HOUR / 10
    assert fsr.seconds_left(None, 1024, 0) == 60 + HOUR
    assert fsr.seconds_left("enabling", 1024, 100) == HOUR
    assert fsr.seconds_left("optimizing", 1024, 600) == HOUR - 600
    assert fsr.seconds_left("optimizing", 1024, 2 * HOUR) == 0.0
    assert fsr.seconds_left("enabled", 1024, 0) == 0.0


def test_quota_counts_only_other_snapshots() -> None:
    assert fsr.quota_problem(["a", "b"], RegionLimit(5), {"a", "x", "y"}) is None
    why = fsr.quota_problem(["a", "b", "c"], RegionLimit(5), {"x", "y", "z", "a"})
    assert why == (
        "FSR was not enabled: the set has 3 snapshots, and this Region allows FSR on 5 "
        "snapshots at once (ebs quota L-631ECBD3), 3 of them already taken by other "
        "snapshots, so 2 are free"
    )
    assert "so 0 are free" in str(fsr.quota_problem(["a"], RegionLimit(1), {"x", "y"}))


def test_owners_of_pairs_already_on() -> None:
    claims = {"arn:me": ["s1@az1"], "arn:ended": ["s2@az1"], "arn:live": ["s3@az1", "s2@az1"]}
    running = {"arn:live": True, "arn:ended": False}
    before, adopted = fsr.owners(
        ["s1", "s2", "s3", "s4"], claims, "arn:me", "az1", lambda arn: running[arn]
    )
    # s1: this run's own claim; s2 and s3: a running restore shares them; s4: nobody's claim
    assert (before, adopted) == ({"s2", "s3", "s4"}, set())
    before, adopted = fsr.owners(
        ["s2"], {"arn:ended": ["s2@az1"]}, "arn:me", "az1", lambda arn: running[arn]
    )
    assert (before, adopted) == (set(), {"s2"})


def test_observe_records_when_each_state_was_first_seen() -> None:
    f: dict[str, Any] = {"waitedSeconds": 30, "seen": {"snap-0": ["enabling", 0]}}
    fsr.observe(f, {"snap-0": "enabling", "snap-1": "absent"})
    assert f["seen"] == {"snap-0": ["enabling", 0], "snap-1": ["absent", 30]}
    f["waitedSeconds"] = 90
    fsr.observe(f, {"snap-0": "optimizing", "snap-1": "absent"})
    assert f["seen"] == {"snap-0": ["optimizing", 90], "snap-1": ["absent", 30]}


def test_credit_wait_counts_only_this_runs_enabled_pairs() -> None:
    m = members(1024, 1024)
    f = {"ours": ["snap-0"], "waitedSeconds": 1000, "seen": {"snap-0": ["enabled", 400]}}
    current = {"snap-0": "enabled", "snap-1": "enabled"}
    assert fsr.credit_wait(m, f, current) == HOUR - 600
    assert fsr.credit_wait(m, f, {"snap-0": "optimizing", "snap-1": "enabled"}) == 0.0
    # seen for the first time in this look: the whole credit is still to come
    assert fsr.credit_wait(m, {"ours": ["snap-0"], "waitedSeconds": 5}, current) == HOUR


def test_next_wait_is_the_slowest_pair_within_bounds() -> None:
    m = members(8)
    f = {"ours": [], "waitedSeconds": 0}
    # 8 GiB: a minute of enabling, under 30 s of optimizing: 88 s
    assert fsr.next_wait(m, f, {}, allow_optimizing=False) == 88
    # this run's own pair also waits for its first credit; capped at MAX_WAIT_SECONDS
    assert fsr.next_wait(m, {"ours": ["snap-0"], "waitedSeconds": 0}, {}, False) == 300
    # allowed to use optimizing pairs: only the enabling minute counts, at least MIN_WAIT
    f = {"ours": [], "waitedSeconds": 50, "seen": {"snap-0": ["enabling", 0]}}
    assert fsr.next_wait(m, f, {"snap-0": "enabling"}, allow_optimizing=True) == 15
    # a usable pair needs no wait of its own
    assert fsr.next_wait(m, f, {"snap-0": "optimizing"}, allow_optimizing=True) == 15


def test_next_wait_for_a_pair_slower_than_the_pace_is_a_quarter_of_the_wait() -> None:
    m = members(8)
    f = {"ours": [], "waitedSeconds": 800, "seen": {"snap-0": ["optimizing", 0]}}
    assert fsr.next_wait(m, f, {"snap-0": "optimizing"}, allow_optimizing=False) == 200


def judge(
    current: dict[str, str], f: dict[str, Any], *, allow: bool = False, limit: int = 3600
) -> Verdict:
    m = members(*[8] * len(current))
    pairs = {
        sid: PairState(sid, st, reason="Server.InternalError" if st == "disabled" else "")
        for sid, st in current.items()
        if st != "absent"
    }
    assert fsr.current_states([x["snapshotId"] for x in m], pairs) == current
    return fsr.judge(m, f, current, pairs, allow_optimizing=allow, limit_seconds=limit)


def test_judge_ready_when_every_pair_is_usable_and_has_its_credit() -> None:
    f = {"ours": [], "waitedSeconds": 60}
    assert judge({"snap-0": "enabled"}, f) == Verdict("ready")
    assert judge({"snap-0": "optimizing"}, f, allow=True) == Verdict("ready")
    # this run enabled it a moment ago: the bucket is still empty
    f = {"ours": ["snap-0"], "waitedSeconds": 60, "seen": {"snap-0": ["enabled", 60]}}
    assert judge({"snap-0": "enabled"}, f) == Verdict("wait", wait_seconds=300)


def test_judge_falls_back_when_fsr_stops_or_the_limit_passes() -> None:
    f = {"ours": [], "waitedSeconds": 120}
    assert judge({"snap-0": "enabled", "snap-1": "disabled"}, f) == Verdict(
        "fallback",
        "FSR stopped after it was enabled, after 120 s: snap-1 disabled (Server.InternalError)",
    )
    assert judge({"snap-0": "disabling"}, f).why.endswith("snap-0 disabling (no reason)")
    assert judge({"snap-0": "enabled", "snap-1": "absent"}, f, limit=120) == Verdict(
        "fallback", "FSR was not usable after 120 s (snap-1 absent)"
    )


def test_judge_never_waits_past_the_limit() -> None:
    f = {"ours": [], "waitedSeconds": 3590, "seen": {"snap-0": ["enabling", 3590]}}
    assert judge({"snap-0": "enabling"}, f) == Verdict("wait", wait_seconds=10)
    f = {"ours": [], "waitedSeconds": 0}
    assert judge({"snap-0": "absent"}, f, limit=3600) == Verdict("wait", wait_seconds=88)


@pytest.mark.parametrize("state", ["enabling", "optimizing", "enabled"])
def test_every_billed_state_is_active(state: str) -> None:
    assert fsr.active(state)
