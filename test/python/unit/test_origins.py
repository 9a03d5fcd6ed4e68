"""Sets of more than one origin in one place (taken here, copied from elsewhere).

restore.set_choice: two sources' arrays of one name (other md UUIDs) copied into one place are
never restored one for the other: latest refuses to choose, and names the sets' origins and md
UUIDs. monitoring: the RPO of the backups here counts the sets taken here; copies never hide a
stalled backup."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from raidsnap import monitoring
from raidsnap.errors import InvalidInputError
from raidsnap.sets import Manifest, SetMember, SnapshotSet
from raidsnap.workflows.restore.set_choice import refuse_two_arrays

T0 = datetime(2026, 11, 1, 4, 0, tzinfo=UTC)
EAST = "0a1b2c3d:4e5f6a7b:8c9d0e1f:2a3b4c5d"
OTHER = "ffffffff:4e5f6a7b:8c9d0e1f:2a3b4c5d"


def a_set(set_id: str, uuid: str, origin: tuple[str, str] | None, hours: int) -> SnapshotSet:
    started = T0 + timedelta(hours=hours)
    members = tuple(
        SetMember(
            snapshot_id=f"snap-{set_id}-{i}",
            volume_id="vol-ffffffff",
            index=i,
            state="completed",
            progress=100,
            start_time=started,
            size_gib=8,
            encrypted=False,
            kms_key_id=None,
            state_message="",
            tags={"raidsnap:array": "db1", "raidsnap:set-id": set_id, "raidsnap:md-uuid": uuid},
        )
        for i in range(2)
    )
    manifest = Manifest(
        array="db1",
        set_id=set_id,
        execution_arn="arn",
        status="taken",
        member_count=2,
        volumes={0: "vol-0", 1: "vol-1"},
        snapshots={m.index or 0: m.snapshot_id for m in members},
        started=started,
        md={"uuid": uuid},
        source={"account": origin[0], "region": origin[1]} if origin else {},
    )
    return SnapshotSet(set_id, "db1", 2, members, manifest)


def test_latest_refuses_to_choose_between_copies_of_two_arrays_of_one_name() -> None:
    east = a_set("east", EAST, ("111122223333", "us-east-1"), 0)
    eu = a_set("eu", OTHER, ("111122223333", "eu-west-1"), 1)
    with pytest.raises(InvalidInputError, match="setId") as err:
        refuse_two_arrays("db1", [east, eu], [eu])
    assert EAST in str(err.value) and OTHER in str(err.value)
    assert "us-east-1" in str(err.value) and "eu-west-1" in str(err.value)


def test_copies_of_one_array_from_two_places_and_sets_taken_here_are_chosen_among() -> None:
    east = a_set("east", EAST, ("111122223333", "us-east-1"), 0)
    # one array copied from two places (one md UUID): latest takes the newest origin's
    again = a_set("again", EAST, ("444455556666", "us-east-1"), 1)
    refuse_two_arrays("db1", [east, again], [again])
    # a set taken here is chosen first (one_origin), whatever copies there are
    local = a_set("local", OTHER, None, 2)
    refuse_two_arrays("db1", [east, local], [local])


def test_the_rpo_here_counts_the_sets_taken_here_not_newer_copies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN db1's own backups here stalled 30 hours ago, and a copy of another origin arrived since
    own = a_set("own", OTHER, None, 0)
    copy = a_set("copy", EAST, ("111122223333", "us-east-1"), 29)
    # ... and db2 has only copies here (this stack is where it is copied to)
    db2 = a_set("db2-copy", EAST, ("111122223333", "us-east-1"), 20)
    found = {"db1": [own, copy], "db2": [db2]}
    monkeypatch.setattr(monitoring, "list_all_sets", lambda: found)
    now = T0 + timedelta(hours=30)
    by_array = {a.array: a for a in monitoring.ages(now, ["db1"])}
    # THEN db1's age is its own newest set's, 30 hours
    assert by_array["db1"].newest_complete is own
    assert by_array["db1"].age_minutes == 30 * 60
    # ... and an array with only copies here reports their age
    assert by_array["db2"].newest_complete is db2
