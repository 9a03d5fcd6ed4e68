"""plan.adoption: which groups of tagged snapshots could have come from one backup, what their
manifest would be, and every reason a group is refused."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from raidsnap.plan.adoption import MAX_START_SPREAD, review
from raidsnap.sets import SnapshotSet

ACCOUNT = "123456789012"
T0 = datetime(2026, 11, 1, 4, 0, tzinfo=UTC)
UUID = "0a1b2c3d:4e5f6a7b:8c9d0e1f:2a3b4c5d"
WHEN = "2026-11-24T10:00:00Z by arn:aws:iam::123456789012:user/operator"


def snapshots(set_id: str = "db1-a", members: int = 3, **override: Any) -> list[dict[str, Any]]:
    """The snapshots one backup of db1 leaves: one per member, tagged as raidsnap tags them."""
    out = []
    for i in range(members):
        set_tags = {
            "raidsnap:array": "db1",
            "raidsnap:set-id": set_id,
            "raidsnap:member-index": str(i),
            "raidsnap:member-count": str(members),
            "raidsnap:source-volume": f"vol-{i}",
            "raidsnap:md-uuid": UUID,
            "raidsnap:md-device": "/dev/md0",
            "raidsnap:mount-point": "/data",
            "raidsnap:md-level": "raid0",
            "raidsnap:consistency": "crash",
            "raidsnap:backup-execution": "arn:aws:states:us-east-1:123456789012:execution:b:1",
        }
        out.append(
            {
                "SnapshotId": f"snap-{set_id}-{i}",
                "VolumeId": f"vol-{i}",
                "OwnerId": ACCOUNT,
                "State": "completed",
                "Progress": "100%",
                "StartTime": T0,
                "VolumeSize": 32,
                "Tags": [{"Key": k, "Value": v} for k, v in set_tags.items()],
            }
        )
    return out


def tag(raw: dict[str, Any], key: str, value: str | None) -> None:
    tags = {t["Key"]: t["Value"] for t in raw["Tags"]}
    if value is None:
        tags.pop(key, None)
    else:
        tags[key] = value
    raw["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]


def judged(raws: list[dict[str, Any]], recorded: dict[str, Any] | None = None) -> Any:
    (group,) = review("db1", raws, ACCOUNT, recorded or {}, WHEN).groups
    return group


def test_one_backups_snapshots_become_the_manifest_the_backup_would_have_written() -> None:
    group = judged(snapshots())
    assert group.adoptable and group.refusals == ()
    m = group.manifest
    assert (m.array, m.set_id, m.status, m.member_count) == ("db1", "db1-a", "taken", 3)
    assert m.snapshots == {0: "snap-db1-a-0", 1: "snap-db1-a-1", 2: "snap-db1-a-2"}
    assert m.volumes == {0: "vol-0", 1: "vol-1", 2: "vol-2"}
    assert (m.started, m.degraded, m.consistency) == (T0, False, "crash")
    assert m.md == {"uuid": UUID, "device": "/dev/md0", "mountPoint": "/data"}
    assert m.execution_arn.endswith(":execution:b:1")
    # No tag names the instance: an adopted set never moves the array (raidsnap.aws.homes).
    assert (m.instance_id, m.adopted) == ("", WHEN)
    # And the restore takes it as complete, exactly as a backup's.
    from raidsnap.sets import member_of  # noqa: PLC0415

    members = tuple(member_of(r) for r in snapshots())
    assert SnapshotSet("db1-a", "db1", 3, members, m).restorable


def forge(change: str) -> list[dict[str, Any]]:
    raws = snapshots()
    second = raws[1]
    if change == "md uuid":
        tag(second, "raidsnap:md-uuid", "ffffffff:4e5f6a7b:8c9d0e1f:2a3b4c5d")
    elif change == "index duplicated":
        tag(second, "raidsnap:member-index", "0")
    elif change == "index missing":
        tag(second, "raidsnap:member-index", None)
    elif change == "index outside":
        tag(second, "raidsnap:member-index", "7")
    elif change == "count":
        tag(second, "raidsnap:member-count", "4")
    elif change == "member missing":
        raws.pop(1)
    elif change == "pending":
        second["State"] = "pending"
    elif change == "started apart":
        second["StartTime"] = T0 + MAX_START_SPREAD + timedelta(seconds=1)
    elif change == "foreign":
        second["OwnerId"] = "210987654321"
    elif change == "other volume":
        tag(second, "raidsnap:source-volume", "vol-9")
    elif change == "same volume":
        second["VolumeId"] = "vol-0"
        tag(second, "raidsnap:source-volume", "vol-0")
    elif change == "mount point":
        tag(second, "raidsnap:mount-point", "/etc")
    return raws


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("md uuid", "the members disagree on raidsnap:md-uuid (snap-db1-a-0 says 0a1b2c3d"),
        ("index duplicated", "slot 0 is claimed by 2 snapshots (snap-db1-a-0, snap-db1-a-1)"),
        ("index missing", "snapshot snap-db1-a-1 has no usable raidsnap:member-index tag"),
        ("index outside", "outside 0..2: slot 7"),
        ("count", "the members disagree on raidsnap:member-count (snap-db1-a-0 says 3;"),
        ("member missing", "no snapshot for slot 1 of 3"),
        ("pending", "snapshot snap-db1-a-1 (member 1) is pending, not completed"),
        ("started apart", "the members started 2 s apart: one CreateSnapshots call starts"),
        ("foreign", "snapshot snap-db1-a-1 belongs to account 210987654321, not to this account"),
        (
            "other volume",
            "snapshot snap-db1-a-1 is tagged as taken of vol-9, but EC2 took it of vol-1",
        ),
        ("same volume", "more than one member was taken of volume(s) vol-0"),
        ("mount point", "the members disagree on raidsnap:mount-point"),
    ],
)
def test_a_group_whose_members_disagree_is_refused_and_says_why(change: str, reason: str) -> None:
    group = judged(forge(change))
    assert not group.adoptable and group.manifest is None
    assert any(r.startswith(reason) for r in group.refusals), group.refusals


def test_members_a_second_apart_are_still_one_call() -> None:
    raws = snapshots()
    raws[2]["StartTime"] = T0 + MAX_START_SPREAD
    assert judged(raws).adoptable


def test_a_degraded_set_is_recorded_as_degraded_with_its_missing_slots() -> None:
    raws = snapshots()
    raws.pop(2)
    for raw in raws:
        tag(raw, "raidsnap:degraded", "true")
    group = judged(raws)
    assert group.adoptable
    assert (group.manifest.degraded, group.manifest.missing_slots) == (True, (2,))


def test_a_set_the_table_records_is_never_rebuilt() -> None:
    same = judged(snapshots()).manifest
    group = judged(snapshots(), {"db1-a": same})
    assert group.already_recorded and not group.adoptable
    other = replace(same, snapshots={0: "snap-x", 1: "snap-y", 2: "snap-z"})
    found = review("db1", snapshots(), ACCOUNT, {"db1-a": other}, WHEN)
    assert [g.set_id for g in found.conflicting] == ["db1-a"]
    assert found.adoptable == []


def test_groups_come_oldest_first_and_snapshots_without_a_set_id_are_left_alone() -> None:
    newer = snapshots("db1-b")
    for raw in newer:
        raw["StartTime"] = T0 + timedelta(hours=4)
    loose = snapshots("x", members=1)
    tag(loose[0], "raidsnap:set-id", None)
    found = review("db1", [*newer, *snapshots("db1-a"), *loose], ACCOUNT, {}, WHEN)
    assert [g.set_id for g in found.groups] == ["db1-a", "db1-b"]
    assert found.without_set_id == ["snap-x-0"]


def test_a_recorded_set_keeps_its_record_though_a_forged_snapshot_joined_its_tags() -> None:
    recorded = judged(snapshots()).manifest
    forged = {**snapshots()[0], "SnapshotId": "snap-forged", "VolumeId": "vol-7"}
    found = review("db1", [*snapshots(), forged], ACCOUNT, {"db1-a": recorded}, WHEN)
    (group,) = found.groups
    assert group.refusals and not group.adoptable
    # Not refused as a set to adopt (the table records it), but reported: its tags disagree.
    assert found.refused == []
    assert [g.set_id for g in found.conflicting] == ["db1-a"]


def copies(members: int = 3, spread: int = 0) -> list[dict[str, Any]]:
    """A set of us-east-1 copied here, as the copy step tags its copies: one CopySnapshot per
    member (their own StartTimes minutes apart), VolumeId arbitrary (EC2 API reference,
    Snapshot.VolumeId), the source's tags without its backup execution, and the copy's own."""
    out = snapshots(members=members)
    for i, raw in enumerate(out):
        source_start = T0 + timedelta(seconds=spread * i)
        raw |= {"VolumeId": "vol-ffffffff", "StartTime": T0 + timedelta(minutes=40 + 7 * i)}
        tag(raw, "raidsnap:backup-execution", None)
        for key, value in {
            "raidsnap:source-account": "111122223333",
            "raidsnap:source-region": "us-east-1",
            "raidsnap:source-snapshot": f"snap-0source{i}",
            "raidsnap:copy-execution": "arn:aws:states:us-west-2:123456789012:execution:c:1",
            "raidsnap:source-start-time": f"{source_start:%Y-%m-%dT%H:%M:%SZ}",
        }.items():
            tag(raw, key, value)
    return out


def test_a_copied_set_is_adopted_as_a_copy_from_its_origin() -> None:
    group = judged(copies())
    assert group.adoptable and group.refusals == ()
    m = group.manifest
    assert dict(m.source) == {"account": "111122223333", "region": "us-east-1"}
    # The source set's point in time and volumes, not the copies' own
    assert (m.started, group.taken_at) == (T0, T0)
    assert m.volumes == {0: "vol-0", 1: "vol-1", 2: "vol-2"}
    assert m.execution_arn.endswith(":execution:c:1")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("spread", "started 4 s apart"),
        ("no start", "no usable raidsnap:source-start-time"),
        ("same source", "copy of source snapshot(s) snap-0source0"),
        ("no source", "has no raidsnap:source-snapshot tag"),
        ("origin", "disagree on raidsnap:source-region"),
        ("not a copy", "disagree on raidsnap:source-account"),
    ],
)
def test_copies_that_could_not_come_from_one_set_are_refused(change: str, reason: str) -> None:
    raws = copies(spread=2 if change == "spread" else 0)
    second = raws[1]
    if change == "no start":
        tag(second, "raidsnap:source-start-time", None)
    elif change == "same source":
        tag(second, "raidsnap:source-snapshot", "snap-0source0")
    elif change == "no source":
        tag(second, "raidsnap:source-snapshot", None)
    elif change == "origin":
        tag(second, "raidsnap:source-region", "eu-west-1")
    elif change == "not a copy":
        tag(second, "raidsnap:source-account", None)
    group = judged(raws)
    assert not group.adoptable
    assert any(reason in why for why in group.refusals), group.refusals
