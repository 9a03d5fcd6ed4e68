"""plan.retention: every reason a set is kept or deleted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from raidsnap.plan.retention import plan
from raidsnap.sets import Manifest, SetMember, SnapshotSet

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def a_set(
    n: int,
    *,
    status: str = "taken",
    state: str = "completed",
    recorded: bool = True,
    members: int = 1,
    degraded: bool = False,
    hours_apart: int = 1,
    md_uuid: str | None = "0a1b2c3d:4e5f6a7b:8c9d0e1f:2a3b4c5d",
) -> SnapshotSet:
    """Set ``n`` of array db1, started ``n * hours_apart`` hours after T0; a degraded set lacks
    its last member (its backup ran while that volume was gone); ``md_uuid`` None: taken from
    the volume tags, with no md UUID recorded."""
    started = T0 + timedelta(hours=hours_apart * n)
    set_id = f"db1-{n:03d}"
    slots = range(members - 1) if degraded else range(members)
    snaps = tuple(
        SetMember(
            snapshot_id=f"snap-{n:03d}" + (str(i) if members > 1 else ""),
            volume_id=f"vol-{i}",
            index=i,
            state=state,
            progress=100,
            start_time=started,
            size_gib=8,
            encrypted=False,
            kms_key_id=None,
            state_message="",
            tags={"raidsnap:array": "db1", "raidsnap:set-id": set_id}
            | ({"raidsnap:md-uuid": md_uuid} if md_uuid else {}),
        )
        for i in slots
    )
    manifest = Manifest(
        array="db1",
        set_id=set_id,
        execution_arn=f"arn:exec:{n}",
        status=status,  # type: ignore[arg-type]
        member_count=members,
        volumes={i: f"vol-{i}" for i in range(members)},
        snapshots={m.index: m.snapshot_id for m in snaps if m.index is not None},
        started=started,
        degraded=degraded,
        missing_slots=(members - 1,) if degraded else (),
    )
    return SnapshotSet(set_id, "db1", members, snaps, manifest if recorded else None)


def reasons(sets: list[SnapshotSet], keep: int, protected: tuple[str, ...] = ()) -> dict[str, str]:
    result = plan(sets, keep, protected, now=T0 + timedelta(hours=30))
    kept = {s.set_id for s in result.keep}
    deleted = {s.set_id for s in result.delete}
    assert kept | deleted == set(result.reasons)
    assert not kept & deleted
    return {k: ("keep: " if k in kept else "delete: ") + v for k, v in result.reasons.items()}


def test_every_reason() -> None:
    sets = [
        a_set(0, state="error"),  # incomplete, older than every kept set
        a_set(1),  # complete, older than the newest one
        a_set(2),  # protected by a running restore
        a_set(3, state="error"),  # incomplete, older than the newest such set
        a_set(4, state="pending"),  # incomplete but still pending
        a_set(5, state="error"),  # incomplete, newer than the oldest kept complete set
        a_set(6),  # within retention
        a_set(7, state="error"),
        a_set(8, status="taking"),  # its backup is still recording it
        a_set(9, recorded=False),  # never recorded: not planned at all
    ]
    got = reasons(sets, keep=0, protected=("db1-002",))
    assert got == {
        "db1-000": "delete: incomplete and older than every kept set",
        "db1-001": "delete: older than the newest 1 restorable sets",
        "db1-002": "keep: in use by a running restore, or being copied elsewhere",
        "db1-004": "keep: incomplete and still pending",
        "db1-003": "delete: incomplete and older than every kept set",
        "db1-005": "delete: incomplete and older than every kept set",
        "db1-006": "keep: within retention",
        "db1-007": "delete: incomplete, and older than the newest 1 such sets",
        "db1-008": "keep: incomplete and still pending",
    }


def test_incomplete_sets_newer_than_the_kept_ones_are_kept_up_to_the_count() -> None:
    sets = [a_set(0), a_set(1, state="error"), a_set(2, state="error"), a_set(3, state="error")]
    assert reasons(sets, keep=2) == {
        "db1-000": "keep: within retention",
        "db1-001": "delete: incomplete, and older than the newest 2 such sets",
        "db1-002": "keep: incomplete, but newer than the oldest kept set",
        "db1-003": "keep: incomplete, but newer than the oldest kept set",
    }


def test_without_a_complete_set_only_the_newest_incomplete_ones_stay() -> None:
    sets = [a_set(0, state="error"), a_set(1, state="error")]
    assert reasons(sets, keep=1) == {
        "db1-000": "delete: incomplete, and older than the newest 1 such sets",
        "db1-001": "keep: incomplete, but newer than the oldest kept set",
    }
    assert plan([], 3, (), T0).keep == ()


def test_a_degraded_week_keeps_the_good_sets_and_only_the_newest_degraded_ones() -> None:
    good = [a_set(n, members=2, hours_apart=4) for n in range(10)]
    degraded = [
        a_set(n, members=2, degraded=True, hours_apart=4) for n in range(10, 52)
    ]  # a week of degraded backups
    result = plan([*good, *degraded], keep_complete=7, protected=(), now=T0 + timedelta(days=9))
    kept = {s.set_id for s in result.keep}
    # the newest seven good sets stay: the array can still be restored whole from them
    assert {s.set_id for s in good[-7:]} <= kept
    # of the degraded sets only the newest seven stay (never counted, never unbounded)
    assert {s.set_id for s in degraded if s.set_id in kept} == {s.set_id for s in degraded[-7:]}
    assert len(result.delete) == 3 + 35


def test_a_degraded_set_newer_than_every_good_one_is_kept() -> None:
    sets = [a_set(0, members=2, hours_apart=4), a_set(1, members=2, degraded=True, hours_apart=4)]
    result = plan(sets, keep_complete=7, protected=(), now=T0 + timedelta(days=1))
    assert {s.set_id for s in result.keep} == {"db1-000", "db1-001"}
    assert result.delete == ()


def test_sets_without_an_md_uuid_never_evict_the_newest_restorable_one() -> None:
    # A week of backups from the volume tags (agent offline) after the one set with a UUID
    sets = [a_set(0)] + [a_set(n, md_uuid=None) for n in range(1, 10)]
    got = reasons(sets, 7)
    assert got["db1-000"] == "keep: within retention"
    assert got["db1-009"] == (
        "keep: complete but without a recorded md UUID, but newer than the oldest kept set"
    )
    assert got["db1-002"] == (
        "delete: complete but without a recorded md UUID, and older than the newest 7 such sets"
    )
    assert [k for k, v in got.items() if v.startswith("keep")] == [
        f"db1-{n:03d}" for n in [0, *range(3, 10)]
    ]
