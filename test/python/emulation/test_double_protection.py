"""What the double does where a delete is held back, as EC2 does: snapshot locks (governance,
compliance, the cooling-off period) and the Recycle Bin."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from botocore.exceptions import ClientError
from test_double import Host, error_code, launch_host, snapshot

from raidsnap_emulation.clock import VirtualClock
from raidsnap_emulation.double import AwsDouble
from raidsnap_emulation.double.locks import LOCKED_CODE

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client

DAY = 86400


@pytest.fixture
def host(ec2: EC2Client, clock: VirtualClock) -> Host:
    return launch_host(ec2, clock)


def completed_snapshot(ec2: EC2Client, double: AwsDouble, host: Host, tag: str = "") -> str:
    tags = [{"Key": "raidsnap:set-id", "Value": tag}] if tag else []
    spec = [{"ResourceType": "snapshot", "Tags": tags}] if tags else []
    snapshot_id = ec2.create_snapshot(
        VolumeId=host.data_volumes[0],
        TagSpecifications=spec,  # type: ignore[arg-type]
    )["SnapshotId"]
    double.clock.advance(double.snapshot_seconds + 1)
    return snapshot_id


def lock_state(ec2: EC2Client, snapshot_id: str) -> str | None:
    found = ec2.describe_locked_snapshots(SnapshotIds=[snapshot_id])["Snapshots"]
    return found[0]["LockState"] if found else None


def test_a_governance_lock_refuses_the_delete_until_it_is_unlocked(
    ec2: EC2Client, double: AwsDouble, host: Host
) -> None:
    snap = completed_snapshot(ec2, double, host)
    locked = ec2.lock_snapshot(SnapshotId=snap, LockMode="governance", LockDuration=7)
    assert (locked["LockState"], locked["LockDuration"]) == ("governance", 7)
    assert "CoolOffPeriod" not in locked
    with pytest.raises(ClientError) as refused:
        ec2.delete_snapshot(SnapshotId=snap)
    assert error_code(refused) == LOCKED_CODE
    assert snapshot(ec2, snap)["SnapshotId"] == snap
    ec2.unlock_snapshot(SnapshotId=snap)
    assert lock_state(ec2, snap) is None
    ec2.delete_snapshot(SnapshotId=snap)
    assert (
        ec2.describe_snapshots(Filters=[{"Name": "snapshot-id", "Values": [snap]}])["Snapshots"]
        == []
    )


def test_a_compliance_lock_can_be_undone_only_in_its_cooling_off_period(
    ec2: EC2Client, double: AwsDouble, host: Host, clock: VirtualClock
) -> None:
    undone = completed_snapshot(ec2, double, host)
    ec2.lock_snapshot(SnapshotId=undone, LockMode="compliance", LockDuration=30, CoolOffPeriod=2)
    assert lock_state(ec2, undone) == "compliance-cooloff"
    ec2.unlock_snapshot(SnapshotId=undone)
    assert lock_state(ec2, undone) is None

    held = completed_snapshot(ec2, double, host)
    first = ec2.lock_snapshot(
        SnapshotId=held, LockMode="compliance", LockDuration=30, CoolOffPeriod=2
    )
    assert first["CoolOffPeriodExpiresOn"] == first["LockCreatedOn"] + timedelta(hours=2)
    clock.advance(2 * 3600 + 1)
    assert lock_state(ec2, held) == "compliance"
    for attempt in (
        lambda: ec2.unlock_snapshot(SnapshotId=held),
        lambda: ec2.lock_snapshot(SnapshotId=held, LockMode="compliance", LockDuration=10),
        lambda: ec2.lock_snapshot(SnapshotId=held, LockMode="governance", LockDuration=60),
        lambda: ec2.delete_snapshot(SnapshotId=held),
    ):
        with pytest.raises(ClientError) as refused:
            attempt()
        assert error_code(refused) == LOCKED_CODE
    # Only a longer lock is taken after the cooling-off period.
    longer = ec2.lock_snapshot(SnapshotId=held, LockMode="compliance", LockDuration=40)
    assert longer["LockExpiresOn"] > first["LockExpiresOn"]
    clock.advance(40 * DAY)
    assert lock_state(ec2, held) == "expired"
    ec2.delete_snapshot(SnapshotId=held)


def test_a_lock_on_a_pending_snapshot_counts_from_its_completion(
    ec2: EC2Client, double: AwsDouble, host: Host, clock: VirtualClock
) -> None:
    started = clock.now()
    snap = ec2.create_snapshot(VolumeId=host.data_volumes[1])["SnapshotId"]
    locked = ec2.lock_snapshot(SnapshotId=snap, LockMode="governance", LockDuration=1)
    completes = started + timedelta(seconds=double.snapshot_seconds)
    assert locked["LockDurationStartTime"] == completes
    assert locked["LockExpiresOn"] == completes + timedelta(days=1)


def test_lock_parameters_are_checked(ec2: EC2Client, double: AwsDouble, host: Host) -> None:
    snap = completed_snapshot(ec2, double, host)
    until = datetime(2030, 1, 1, tzinfo=UTC)
    for params in (
        {"LockMode": "governance"},
        {"LockMode": "governance", "LockDuration": 1, "ExpirationDate": until},
        {"LockMode": "governance", "LockDuration": 1, "CoolOffPeriod": 1},
    ):
        with pytest.raises(ClientError) as refused:
            ec2.lock_snapshot(SnapshotId=snap, **params)  # type: ignore[arg-type]
        assert error_code(refused) == "InvalidParameterCombination"
    dated = ec2.lock_snapshot(SnapshotId=snap, LockMode="governance", ExpirationDate=until)
    assert dated["LockExpiresOn"] == until
    assert "LockDuration" not in dated


def test_describe_locked_snapshots_filters_by_id_and_lock_state(
    ec2: EC2Client, double: AwsDouble, host: Host
) -> None:
    governed = completed_snapshot(ec2, double, host)
    complied = ec2.create_snapshot(VolumeId=host.data_volumes[2])["SnapshotId"]
    free = ec2.create_snapshot(VolumeId=host.data_volumes[1])["SnapshotId"]
    ec2.lock_snapshot(SnapshotId=governed, LockMode="governance", LockDuration=3)
    ec2.lock_snapshot(SnapshotId=complied, LockMode="compliance", LockDuration=3)
    everything = ec2.describe_locked_snapshots()["Snapshots"]
    assert {s["SnapshotId"] for s in everything} == {governed, complied}
    assert all(s["OwnerId"] == "123456789012" for s in everything)
    assert ec2.describe_locked_snapshots(SnapshotIds=[free])["Snapshots"] == []
    compliance = ec2.describe_locked_snapshots(
        Filters=[{"Name": "lock-state", "Values": ["compliance"]}]
    )["Snapshots"]
    assert [s["SnapshotId"] for s in compliance] == [complied]


def test_a_snapshot_deleted_under_a_retention_rule_waits_in_the_recycle_bin(
    ec2: EC2Client, double: AwsDouble, host: Host, clock: VirtualClock
) -> None:
    double.retain_deleted_snapshots(days=7)
    snap = completed_snapshot(ec2, double, host, tag="db1-a")
    ec2.delete_snapshot(SnapshotId=snap)
    # Gone from DescribeSnapshots and from any use; listed in the bin.
    assert ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"] == []
    (binned,) = ec2.list_snapshots_in_recycle_bin()["Snapshots"]
    assert (binned["SnapshotId"], binned["VolumeId"]) == (snap, host.data_volumes[0])
    assert binned["RecycleBinExitTime"] - binned["RecycleBinEnterTime"] == timedelta(days=7)
    for attempt in (
        lambda: ec2.delete_snapshot(SnapshotId=snap),
        lambda: ec2.create_volume(AvailabilityZone=host.zone, SnapshotId=snap),
    ):
        with pytest.raises(ClientError) as refused:
            attempt()
        assert error_code(refused) == "InvalidSnapshot.NotFound"
    # Restored, it is a snapshot as before, with its tags.
    restored = ec2.restore_snapshot_from_recycle_bin(SnapshotId=snap)
    assert (restored["SnapshotId"], restored["State"]) == (snap, "completed")
    tags = {t["Key"]: t["Value"] for t in snapshot(ec2, snap)["Tags"]}
    assert tags["raidsnap:set-id"] == "db1-a"
    assert ec2.list_snapshots_in_recycle_bin()["Snapshots"] == []


def test_the_recycle_bin_deletes_for_good_when_the_retention_ends(
    ec2: EC2Client, double: AwsDouble, host: Host, clock: VirtualClock
) -> None:
    double.retain_deleted_snapshots(days=1)
    snap = completed_snapshot(ec2, double, host)
    ec2.delete_snapshot(SnapshotId=snap)
    clock.advance(DAY + 1)
    assert ec2.list_snapshots_in_recycle_bin()["Snapshots"] == []
    with pytest.raises(ClientError) as gone:
        ec2.restore_snapshot_from_recycle_bin(SnapshotId=snap)
    assert error_code(gone) == "InvalidSnapshot.NotFound"
    # Without a rule, a delete is for good at once.
    double.retain_deleted_snapshots(days=None)
    other = completed_snapshot(ec2, double, host)
    ec2.delete_snapshot(SnapshotId=other)
    assert ec2.list_snapshots_in_recycle_bin()["Snapshots"] == []
