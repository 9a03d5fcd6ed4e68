"""retention.plan on sets built in memory: what a run of degraded backups leaves behind."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from raidsnap.plan.retention import plan
from raidsnap.sets import Manifest, SetMember, SnapshotSet

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def a_set(n: int, *, degraded: bool = False, members: int = 2) -> SnapshotSet:
    started = T0 + timedelta(hours=4 * n)
    set_id = f"db1-{n:03d}"
    slots = range(members - 1) if degraded else range(members)
    snaps = [
        SetMember(
            snapshot_id=f"snap-{n:03d}{i}",
            volume_id=f"vol-{i}",
            index=i,
            state="completed",
            progress=100,
            start_time=started,
            size_gib=32,
            encrypted=False,
            kms_key_id=None,
            state_message="",
            tags={"raidsnap:array": "db1", "raidsnap:set-id": set_id},
        )
        for i in slots
    ]
    manifest = Manifest(
        array="db1",
        set_id=set_id,
        execution_arn=f"arn:exec:{n}",
        status="taken",
        member_count=members,
        volumes={i: f"vol-{i}" for i in range(members)},
        snapshots={s.index: s.snapshot_id for s in snaps if s.index is not None},
        started=started,
        degraded=degraded,
        missing_slots=(members - 1,) if degraded else (),
    )
    return SnapshotSet(set_id, "db1", members, tuple(snaps), manifest)


def test_a_degraded_week_keeps_the_good_sets_and_only_the_newest_degraded_ones() -> None:
    good = [a_set(n) for n in range(10)]
    degraded = [a_set(n, degraded=True) for n in range(10, 52)]  # a week of degraded backups
    result = plan([*good, *degraded], keep_complete=7, protected=(), now=T0 + timedelta(days=9))
    kept = {s.set_id for s in result.keep}
    # the newest seven good sets stay: the array can still be restored whole from them
    assert {s.set_id for s in good[-7:]} <= kept
    # of the degraded sets only the newest seven stay (never counted, never unbounded)
    assert {s.set_id for s in degraded if s.set_id in kept} == {s.set_id for s in degraded[-7:]}
    assert len(result.delete) == 3 + 35


def test_a_degraded_set_newer_than_every_good_one_is_kept() -> None:
    sets = [a_set(0), a_set(1, degraded=True)]
    result = plan(sets, keep_complete=7, protected=(), now=T0 + timedelta(days=1))
    assert {s.set_id for s in result.keep} == {"db1-000", "db1-001"}
    assert result.delete == ()
