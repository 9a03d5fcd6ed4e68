"""Two arrays of one instance taken at one point in time (raidsnap.aws.snapshot_group): one
CreateSnapshots call, each array's set recorded and tagged as its own, nothing half-tagged left
when tagging fails, nothing taken twice by a retried step."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from test_two_arrays import with_logs

from raidsnap.aws import instances, snapshot_group, snapshot_sets, snapshots, volumes
from raidsnap.aws.instances import ArrayInstance, Attachment, Layout, Member
from raidsnap.errors import InvalidInputError, SnapshotFailedError
from raidsnap_emulation.double import acting_as
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import make_array, sets_table

EXECUTION = "arn:aws:states:us-east-1:123456789012:execution:backup:group-1"


def layout(ids: list[str], uuid: str, device: str, mount_point: str) -> Layout:
    return Layout(
        members=tuple(Member(index=i, volume_id=v) for i, v in enumerate(ids)),
        source="discovery",
        md={"uuid": uuid, "device": device, "mountPoint": mount_point, "level": "raid0"},
    )


def two_arrays(emu: Emulation, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """db1 (three members, /data) and logs (two, /logs) on one instance with one unrelated
    volume; the parts a backup of both would pass."""
    fx = make_array(emu.hosts, "db1", 3, unrelated=1)
    logs, logs_uuid = with_logs(emu, fx)
    monkeypatch.setenv("SNAPSHOT_SETS_TABLE", sets_table())  # as the functions have it
    # These tests call the step's code outside any execution, so there is no run to ask whether
    # it still runs; that check is tested through the backup workflow itself
    # (test_review_stopped_backup.py, test_backup_together.py).
    monkeypatch.setattr(snapshots, "refuse_unless_running", lambda execution_arn: None)
    parts = [
        snapshot_group.Part(
            "logs", "logs-set-1", layout(logs, logs_uuid, "/dev/md1", "/logs"), "crash"
        ),
        snapshot_group.Part(
            "db1", "db1-set-1", layout(fx.member_ids, fx.md_uuid, "/dev/md0", "/data"), "crash"
        ),
    ]
    return {
        "fx": fx,
        "logs": logs,
        "parts": parts,
        "instance": instances.describe_instance(fx.instance_id),
        "facts": volumes.raw([*fx.member_ids, *logs]),
        "role": next(
            f
            for f in emu.template.of_type("AWS::Lambda::Function")
            if f.startswith("BackupBackupSnapshot")
        ),
    }


def take(world: dict[str, Any]) -> dict[str, snapshots.Taken]:
    """As the backup's snapshot function does it, with that function's own IAM grants."""
    with acting_as(world["role"]):
        return snapshot_group.create_sets(
            parts=world["parts"],
            execution_arn=EXECUTION,
            started=datetime(2020, 1, 1, tzinfo=UTC),
            instance=world["instance"],
            volume_facts=world["facts"],
        )


def create_snapshots_calls(emu: Emulation) -> list[Any]:
    return [c for c in emu.double.calls if c.operation == "CreateSnapshots" and c.applied]


def test_two_arrays_taken_together_with_one_create_snapshots_call(
    emu: Emulation, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN db1 and logs on one instance, beside an unrelated volume
    world = two_arrays(emu, monkeypatch)
    fx = world["fx"]
    # WHEN both are taken together
    taken = take(world)
    emu.clock.advance(emu.double.snapshot_seconds + 1)
    # THEN one CreateSnapshots took exactly both arrays' members: no boot, no unrelated volume
    (call,) = create_snapshots_calls(emu)
    spec = call.params["InstanceSpecification"]
    assert spec["ExcludeBootVolume"] is True
    assert spec["ExcludeDataVolumeIds"] == fx.other_volume_ids
    # AND each array has a complete set of its own members, with its own tags and slots
    for array, members, uuid in (
        ("db1", fx.member_ids, fx.md_uuid),
        ("logs", world["logs"], None),
    ):
        current = snapshot_sets.get_set(array, f"{array}-set-1")
        assert current is not None
        assert current.complete, array
        assert [m.volume_id for m in current.by_index()] == members
        for m in current.by_index():
            assert m.tags["raidsnap:array"] == array
            assert m.tags["raidsnap:set-id"] == f"{array}-set-1"
            assert m.tags["raidsnap:member-index"] == str(m.index)
            assert m.tags["raidsnap:member-count"] == str(len(members))
        if uuid:
            assert current.md_uuid == uuid
        assert taken[array].snapshot_set.set_id == f"{array}-set-1"
    # AND both sets start at the same instant
    starts = {snapshot_sets.get_set(a, f"{a}-set-1").start_time for a in ("db1", "logs")}  # type: ignore[union-attr]
    assert len(starts) == 1


def test_a_retried_step_takes_nothing_twice(
    emu: Emulation, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the group taken once
    world = two_arrays(emu, monkeypatch)
    first = take(world)
    # WHEN the step runs again (its answer was lost, or a later call was throttled)
    again = take(world)
    # THEN no second CreateSnapshots, and the same snapshots are each array's set
    assert len(create_snapshots_calls(emu)) == 1
    for array in ("db1", "logs"):
        ids = [m.snapshot_id for m in first[array].snapshot_set.by_index()]
        assert [m.snapshot_id for m in again[array].snapshot_set.by_index()] == ids


def test_a_throttled_tagging_is_raised_for_the_step_to_retry_and_then_completes(
    emu: Emulation, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN CreateTags throttled on the first try
    world = two_arrays(emu, monkeypatch)
    emu.double.throttle("ec2", "CreateTags", times=1)
    # WHEN the group is taken: the throttling goes to the step's Retry; the retried step
    with pytest.raises(ClientError):
        take(world)
    take(world)
    emu.clock.advance(emu.double.snapshot_seconds + 1)
    # THEN both sets are complete, from the one CreateSnapshots
    assert len(create_snapshots_calls(emu)) == 1
    for array in ("db1", "logs"):
        current = snapshot_sets.get_set(array, f"{array}-set-1")
        assert current is not None and current.complete


def test_tagging_that_fails_partway_leaves_no_set_and_deletes_only_this_runs_snapshots(
    emu: Emulation, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an older snapshot of a db1 member that this run did not take
    world = two_arrays(emu, monkeypatch)
    ec2 = boto3.client("ec2")
    older = ec2.create_snapshot(VolumeId=world["fx"].member_ids[0])["SnapshotId"]
    emu.clock.advance(emu.double.snapshot_seconds + 1)
    # AND CreateTags refused from the fourth snapshot on (db1 tagged, logs partway)
    real = snapshots.tag_member
    tagged = [0]

    def refuse_late(*args: Any, **kwargs: Any) -> tuple[str, ...]:
        tagged[0] += 1
        if tagged[0] >= 4:
            raise ClientError(
                {"Error": {"Code": "UnauthorizedOperation", "Message": "denied"}}, "CreateTags"
            )
        return real(*args, **kwargs)

    monkeypatch.setattr(snapshots, "tag_member", refuse_late)
    # WHEN the group is taken
    with pytest.raises(SnapshotFailedError, match="no set was recorded"):
        take(world)
    # THEN neither array has a set, the run's snapshots are gone, the older one is not
    ((call,),) = [create_snapshots_calls(emu)]
    assert call.applied
    remaining = {s["SnapshotId"] for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]}
    assert remaining == {older}
    for array in ("db1", "logs"):
        # (only the intent recorded before the call: no snapshot, never complete)
        (intent,) = snapshot_sets.list_sets(array)
        assert intent.manifest is not None and intent.manifest.status == "taking"
        assert not intent.members and not intent.complete


def test_one_array_or_shared_members_are_refused_before_anything_is_taken(
    emu: Emulation, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = two_arrays(emu, monkeypatch)
    db1 = world["parts"][1]
    with pytest.raises(InvalidInputError, match="two or more"):
        snapshot_group.create_sets(
            parts=[db1],
            execution_arn=EXECUTION,
            started=datetime(2020, 1, 1, tzinfo=UTC),
            instance=world["instance"],
            volume_facts=world["facts"],
        )
    twin = snapshot_group.Part("db2", "db2-set-1", db1.layout, "crash")
    with pytest.raises(InvalidInputError, match="member of both"):
        snapshot_group.create_sets(
            parts=[db1, twin],
            execution_arn=EXECUTION,
            started=datetime(2020, 1, 1, tzinfo=UTC),
            instance=world["instance"],
            volume_facts=world["facts"],
        )
    assert not create_snapshots_calls(emu)
    assert not snapshot_sets.list_sets("db1")
    assert not snapshot_sets.list_sets("db2")


def test_more_than_forty_volumes_to_exclude_is_refused() -> None:
    # EC2 takes at most 40 ExcludeDataVolumeIds (InstanceSpecification, EC2 API Reference)
    others = tuple(Attachment(volume_id=f"vol-{i:017x}", device=f"/dev/x{i}") for i in range(41))
    instance = ArrayInstance(
        instance_id="i-0123456789abcdef0",
        availability_zone="us-east-1a",
        root_device="/dev/xvda",
        attachments=(
            Attachment(volume_id="vol-boot", device="/dev/xvda"),
            Attachment(volume_id="vol-m0", device="/dev/sdf"),
            *others,
        ),
    )
    with pytest.raises(InvalidInputError, match="at most 40"):
        snapshot_group.instance_specification(instance, ["vol-m0"])
    spec = snapshot_group.instance_specification(instance, ["vol-m0", others[0].volume_id])
    assert spec["ExcludeBootVolume"] is True
    assert "vol-boot" not in spec["ExcludeDataVolumeIds"]
    assert len(spec["ExcludeDataVolumeIds"]) == 40
