"""The double answers like EC2 and SSM where moto does not."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.client import BaseClient
from botocore.exceptions import ClientError

from raidsnap_emulation.clock import VirtualClock
from raidsnap_emulation.double import AwsDouble, AwsError, CommandContext, CommandOutcome, acting_as
from raidsnap_emulation.double.base import ACTOR_ATTRIBUTE

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ssm import SSMClient


@dataclass(frozen=True)
class Host:
    instance_id: str
    zone: str
    boot_volume: str
    data_volumes: list[str]


def launch_host(ec2: EC2Client, clock: VirtualClock, zone: str = "us-east-1a") -> Host:
    """A running instance with its boot volume and three 8 GiB data volumes attached."""
    reservation = ec2.run_instances(
        ImageId="ami-12345678",
        MinCount=1,
        MaxCount=1,
        InstanceType="m5.large",
        Placement={"AvailabilityZone": zone},
    )
    instance = reservation["Instances"][0]
    instance_id = instance["InstanceId"]
    boot = instance["BlockDeviceMappings"][0]["Ebs"]["VolumeId"]
    data = []
    for index, device in enumerate(("/dev/sdf", "/dev/sdg", "/dev/sdh")):
        volume = ec2.create_volume(
            AvailabilityZone=zone,
            Size=8,
            VolumeType="gp3",
            TagSpecifications=[
                {
                    "ResourceType": "volume",
                    "Tags": [
                        {"Key": "raidsnap:array", "Value": "db1"},
                        {"Key": "raidsnap:member-index", "Value": str(index)},
                    ],
                }
            ],
        )
        data.append((volume["VolumeId"], device))
    clock.advance(60)
    for volume_id, device in data:
        ec2.attach_volume(VolumeId=volume_id, InstanceId=instance_id, Device=device)
    clock.advance(60)
    return Host(instance_id, zone, boot, [v for v, _ in data])


@pytest.fixture
def host(ec2: EC2Client, clock: VirtualClock) -> Host:
    return launch_host(ec2, clock)


def error_code(info: pytest.ExceptionInfo[ClientError]) -> str:
    return str(info.value.response["Error"]["Code"])


def snapshot(ec2: EC2Client, snapshot_id: str) -> Any:
    return ec2.describe_snapshots(SnapshotIds=[snapshot_id])["Snapshots"][0]


def volume(ec2: EC2Client, volume_id: str) -> Any:
    return ec2.describe_volumes(VolumeIds=[volume_id])["Volumes"][0]


def completed_snapshot(ec2: EC2Client, clock: VirtualClock, double: AwsDouble, vol: str) -> str:
    snapshot_id = ec2.create_snapshot(VolumeId=vol)["SnapshotId"]
    clock.advance(double.snapshot_seconds)
    return snapshot_id


# ---------------------------------------------------------------------------- installation


def test_install_patches_and_nested_install_unpatches_only_when_the_outermost_block_ends(
    aws: None, clock: VirtualClock
) -> None:
    original = BaseClient._make_api_call  # type: ignore[attr-defined]
    double = AwsDouble(clock)
    with double.install():
        with double.install():
            assert BaseClient._make_api_call is not original  # type: ignore[attr-defined]
        assert BaseClient._make_api_call is not original  # type: ignore[attr-defined]
        boto3.client("ec2").describe_volumes()
    assert BaseClient._make_api_call is original  # type: ignore[attr-defined]
    boto3.client("ec2").describe_volumes()
    assert [c.operation for c in double.calls] == ["DescribeVolumes"]


def test_a_second_double_cannot_install_while_one_is_installed(
    double: AwsDouble, clock: VirtualClock
) -> None:
    with pytest.raises(RuntimeError), AwsDouble(clock).install():
        pass


def test_unpatches_even_when_the_block_raises(aws: None, clock: VirtualClock) -> None:
    original = BaseClient._make_api_call  # type: ignore[attr-defined]
    with pytest.raises(ValueError), AwsDouble(clock).install():
        raise ValueError("boom")
    assert BaseClient._make_api_call is original  # type: ignore[attr-defined]


def test_calls_a_known_principal_makes_are_authorized_before_they_take_effect(
    double: AwsDouble, ec2: EC2Client, clock: VirtualClock
) -> None:
    spare = ec2.create_volume(AvailabilityZone="us-east-1a", Size=4)["VolumeId"]
    clock.advance(60)
    asked: list[tuple[str, str, str]] = []

    def authorize(service: str, operation: str, params: dict[str, Any], actor: str) -> None:
        asked.append((service, operation, actor))
        if operation == "DeleteVolume":
            raise AwsError("UnauthorizedOperation", "You are not authorized.", 403)

    double.authorize = authorize
    ec2.describe_volumes()  # nobody in particular (a test, an operator): not authorized
    with acting_as("Cleanup"):
        with pytest.raises(ClientError) as denied:
            ec2.delete_volume(VolumeId=spare)
        ec2.describe_volumes(VolumeIds=[spare])
    assert asked == [("ec2", "DeleteVolume", "Cleanup"), ("ec2", "DescribeVolumes", "Cleanup")]
    assert error_code(denied) == "UnauthorizedOperation"
    assert denied.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert volume(ec2, spare)["State"] == "available"  # the denied call changed nothing
    (call,) = [c for c in double.calls if c.operation == "DeleteVolume"]
    assert (call.error_code, call.applied, call.actor) == (
        "UnauthorizedOperation",
        False,
        "Cleanup",
    )


def test_a_call_made_while_a_principals_call_is_answered_is_not_that_principals(
    double: AwsDouble, clock: VirtualClock
) -> None:
    # A state machine's integration invokes a function; what answers the invoke (a test's hook
    # between two steps) asks EC2 with a client of nobody in particular: that call is not the
    # state machine's, and IAM does not judge it as the state machine's.
    asked: list[tuple[str, str, str]] = []

    def authorize(service: str, operation: str, params: dict[str, Any], actor: str) -> None:
        asked.append((service, operation, actor))

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        boto3.client("ec2").describe_volumes()
        return {"StatusCode": 200}

    double.authorize = authorize
    double.route("lambda", "Invoke", answer)
    machine = boto3.client("lambda")
    setattr(machine, ACTOR_ATTRIBUTE, "Machine")
    machine.invoke(FunctionName="step")
    assert asked == [("lambda", "Invoke", "Machine")]


# ---------------------------------------------------------------------------- snapshots


def test_snapshot_is_pending_with_linear_progress_then_completed(
    ec2: EC2Client, clock: VirtualClock, host: Host
) -> None:
    created = ec2.create_snapshot(VolumeId=host.data_volumes[0])
    assert created["State"] == "pending"
    assert created["StartTime"] == clock.now()
    clock.advance(90)
    halfway = snapshot(ec2, created["SnapshotId"])
    assert (halfway["State"], halfway["Progress"]) == ("pending", "50%")
    clock.advance(90)
    done = snapshot(ec2, created["SnapshotId"])
    assert (done["State"], done["Progress"]) == ("completed", "100%")


def test_create_snapshots_skips_boot_and_excluded_volumes_and_tags_every_snapshot(
    ec2: EC2Client, clock: VirtualClock, host: Host
) -> None:
    answer = ec2.create_snapshots(
        InstanceSpecification={
            "InstanceId": host.instance_id,
            "ExcludeBootVolume": True,
            "ExcludeDataVolumeIds": [host.data_volumes[2]],
        },
        TagSpecifications=[
            {"ResourceType": "snapshot", "Tags": [{"Key": "raidsnap:set-id", "Value": "s1"}]}
        ],
        CopyTagsFromSource="volume",
    )
    snaps = answer["Snapshots"]
    assert sorted(s["VolumeId"] for s in snaps) == sorted(host.data_volumes[:2])
    assert {s["StartTime"] for s in snaps} == {clock.now()}
    assert {s["State"] for s in snaps} == {"pending"}
    for snap in snaps:
        tags = {t["Key"]: t["Value"] for t in snapshot(ec2, snap["SnapshotId"])["Tags"]}
        assert tags["raidsnap:set-id"] == "s1"
        assert tags["raidsnap:array"] == "db1"
        assert tags["raidsnap:member-index"] == str(host.data_volumes.index(snap["VolumeId"]))


def test_create_snapshots_without_exclusions_includes_the_boot_volume(
    ec2: EC2Client, host: Host
) -> None:
    answer = ec2.create_snapshots(InstanceSpecification={"InstanceId": host.instance_id})
    assert {s["VolumeId"] for s in answer["Snapshots"]} == {host.boot_volume, *host.data_volumes}


def test_create_snapshots_takes_at_most_40_excluded_volumes(ec2: EC2Client, host: Host) -> None:
    # "You can specify up to 40 volume IDs per request" (EC2 API Reference, InstanceSpecification)
    excluded = [host.data_volumes[2]] + [f"vol-{i:017x}" for i in range(40)]
    with pytest.raises(ClientError) as info:
        ec2.create_snapshots(
            InstanceSpecification={
                "InstanceId": host.instance_id,
                "ExcludeBootVolume": True,
                "ExcludeDataVolumeIds": excluded,
            }
        )
    assert error_code(info) == "InvalidParameterValue"
    assert "40" in str(info.value)
    assert not ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]


def test_second_snapshot_of_a_volume_within_15_seconds_is_rate_limited(
    ec2: EC2Client, clock: VirtualClock, double: AwsDouble, host: Host
) -> None:
    ec2.create_snapshot(VolumeId=host.data_volumes[0])
    clock.advance(10)
    with pytest.raises(ClientError) as info:
        ec2.create_snapshots(
            InstanceSpecification={"InstanceId": host.instance_id, "ExcludeBootVolume": True}
        )
    assert error_code(info) == "SnapshotCreationPerVolumeRateExceeded"
    assert len(ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]) == 1
    clock.advance(5)
    retried = ec2.create_snapshots(
        InstanceSpecification={"InstanceId": host.instance_id, "ExcludeBootVolume": True}
    )
    assert len(retried["Snapshots"]) == 3


def test_failing_volume_snapshots_go_from_pending_to_error_at_half_time(
    ec2: EC2Client, clock: VirtualClock, double: AwsDouble, host: Host
) -> None:
    double.fail_snapshots(host.data_volumes[1])
    snaps = ec2.create_snapshots(
        InstanceSpecification={"InstanceId": host.instance_id, "ExcludeBootVolume": True}
    )["Snapshots"]
    failing = next(s["SnapshotId"] for s in snaps if s["VolumeId"] == host.data_volumes[1])
    clock.advance(89)
    assert snapshot(ec2, failing)["State"] == "pending"
    clock.advance(1)
    failed = snapshot(ec2, failing)
    assert failed["State"] == "error"
    assert failed["StateMessage"]
    clock.advance(600)
    states = {
        s["VolumeId"]: s["State"] for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]
    }
    assert states[host.data_volumes[1]] == "error"
    assert states[host.data_volumes[0]] == "completed"


def test_a_pending_snapshot_can_be_deleted(ec2: EC2Client, host: Host) -> None:
    snapshot_id = ec2.create_snapshot(VolumeId=host.data_volumes[0])["SnapshotId"]
    ec2.delete_snapshot(SnapshotId=snapshot_id)
    assert ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"] == []


def test_describe_snapshots_filters_on_the_emulated_status_and_owner_self(
    ec2: EC2Client, clock: VirtualClock, host: Host
) -> None:
    first = ec2.create_snapshot(VolumeId=host.data_volumes[0])["SnapshotId"]
    clock.advance(120)
    second = ec2.create_snapshot(VolumeId=host.data_volumes[1])["SnapshotId"]
    clock.advance(60)

    def ids(state: str) -> list[str]:
        answer = ec2.describe_snapshots(
            OwnerIds=["self"], Filters=[{"Name": "status", "Values": [state]}]
        )
        return [s["SnapshotId"] for s in answer["Snapshots"]]

    assert (ids("completed"), ids("pending")) == ([first], [second])
    assert ec2.describe_snapshots(OwnerIds=["amazon"])["Snapshots"] == []


def test_describe_snapshots_paginates(ec2: EC2Client, host: Host) -> None:
    for vol in host.data_volumes:
        ec2.create_snapshot(VolumeId=vol)
    pages = list(
        ec2.get_paginator("describe_snapshots").paginate(
            OwnerIds=["self"], PaginationConfig={"PageSize": 2}
        )
    )
    assert [len(p["Snapshots"]) for p in pages] == [2, 1]


# ---------------------------------------------------------------------------- volumes


def test_create_volume_with_same_client_token_returns_same_volume(
    ec2: EC2Client, double: AwsDouble
) -> None:
    first = ec2.create_volume(AvailabilityZone="us-east-1a", Size=8, ClientToken="t-1")
    again = ec2.create_volume(AvailabilityZone="us-east-1a", Size=8, ClientToken="t-1")
    assert again["VolumeId"] == first["VolumeId"]
    assert len(ec2.describe_volumes()["Volumes"]) == 1


def test_create_volume_with_same_client_token_and_other_params_is_a_mismatch(
    ec2: EC2Client,
) -> None:
    ec2.create_volume(AvailabilityZone="us-east-1a", Size=8, ClientToken="t-1")
    with pytest.raises(ClientError) as info:
        ec2.create_volume(AvailabilityZone="us-east-1a", Size=9, ClientToken="t-1")
    assert error_code(info) == "IdempotentParameterMismatch"


def test_volume_goes_creating_then_available(ec2: EC2Client, clock: VirtualClock) -> None:
    created = ec2.create_volume(AvailabilityZone="us-east-1a", Size=8)
    assert created["State"] == "creating"
    clock.advance(9)
    assert volume(ec2, created["VolumeId"])["State"] == "creating"
    clock.advance(1)
    assert volume(ec2, created["VolumeId"])["State"] == "available"


def test_volumes_from_a_failing_snapshot_end_in_error(
    ec2: EC2Client, clock: VirtualClock, double: AwsDouble, host: Host
) -> None:
    snapshot_id = completed_snapshot(ec2, clock, double, host.data_volumes[0])
    double.fail_volumes(snapshot_id)
    created = ec2.create_volume(AvailabilityZone="us-east-1a", SnapshotId=snapshot_id)
    clock.advance(60)
    assert volume(ec2, created["VolumeId"])["State"] == "error"
    answer = ec2.describe_volumes(Filters=[{"Name": "status", "Values": ["error"]}])
    assert [v["VolumeId"] for v in answer["Volumes"]] == [created["VolumeId"]]


def test_volume_initialization_rate_is_validated_stored_and_reported(
    ec2: EC2Client, clock: VirtualClock, double: AwsDouble, host: Host
) -> None:
    snapshot_id = completed_snapshot(ec2, clock, double, host.data_volumes[0])
    for bad in (
        {"VolumeInitializationRate": 99, "SnapshotId": snapshot_id},
        {"VolumeInitializationRate": 301, "SnapshotId": snapshot_id},
        {"VolumeInitializationRate": 200, "Size": 8},
    ):
        with pytest.raises(ClientError) as info:
            ec2.create_volume(AvailabilityZone="us-east-1a", **bad)
        assert error_code(info) == "InvalidParameterValue"
    created = ec2.create_volume(
        AvailabilityZone="us-east-1a", SnapshotId=snapshot_id, VolumeInitializationRate=300
    )
    assert volume(ec2, created["VolumeId"])["VolumeInitializationRate"] == 300


def test_volume_inherits_size_and_encryption_from_its_snapshot(
    ec2: EC2Client, clock: VirtualClock, double: AwsDouble
) -> None:
    source = ec2.create_volume(
        AvailabilityZone="us-east-1a", Size=20, Encrypted=True, KmsKeyId="alias/db"
    )
    clock.advance(10)
    snapshot_id = completed_snapshot(ec2, clock, double, source["VolumeId"])
    restored = volume(
        ec2, ec2.create_volume(AvailabilityZone="us-east-1b", SnapshotId=snapshot_id)["VolumeId"]
    )
    assert (restored["Size"], restored["Encrypted"]) == (20, True)
    assert restored["KmsKeyId"]
    with pytest.raises(ClientError) as info:
        ec2.create_volume(AvailabilityZone="us-east-1b", SnapshotId=snapshot_id, Size=10)
    assert error_code(info) == "InvalidParameterValue"


def test_volume_from_a_pending_snapshot_is_refused(ec2: EC2Client, host: Host) -> None:
    snapshot_id = ec2.create_snapshot(VolumeId=host.data_volumes[0])["SnapshotId"]
    with pytest.raises(ClientError) as info:
        ec2.create_volume(AvailabilityZone="us-east-1a", SnapshotId=snapshot_id)
    assert error_code(info) == "IncorrectState"


def test_create_volume_in_an_unknown_zone_is_an_invalid_parameter(ec2: EC2Client) -> None:
    with pytest.raises(ClientError) as info:
        ec2.create_volume(AvailabilityZone="us-east-1z", Size=8)
    assert error_code(info) == "InvalidParameterValue"
    assert ec2.describe_volumes()["Volumes"] == []


@pytest.mark.parametrize(
    "request_",
    [
        {"VolumeType": "gp3", "Size": 8, "Iops": 16000},  # 500 per GiB: at most 4,000
        {"VolumeType": "gp3", "Size": 32, "Iops": 3000, "Throughput": 1000},  # 0.25 MiB/s per IOPS
        {"VolumeType": "io1", "Size": 10, "Iops": 501},  # 50 per GiB
        {"VolumeType": "io2", "Size": 10, "Iops": 10001},  # 1,000 per GiB
    ],
)
def test_create_volume_refuses_iops_or_throughput_out_of_proportion(
    ec2: EC2Client, request_: dict[str, Any]
) -> None:
    with pytest.raises(ClientError) as info:
        ec2.create_volume(AvailabilityZone="us-east-1a", **request_)
    assert error_code(info) == "InvalidParameterValue"
    assert ec2.describe_volumes()["Volumes"] == []


@pytest.mark.parametrize(
    "request_",
    [
        {"VolumeType": "gp3", "Size": 1, "Iops": 3000, "Throughput": 125},  # the baseline
        {"VolumeType": "gp3", "Size": 32, "Iops": 16000, "Throughput": 1000},
        {"VolumeType": "gp3", "Size": 8, "Iops": 4000, "Throughput": 1000},
        {"VolumeType": "io2", "Size": 20, "Iops": 20000},
    ],
)
def test_create_volume_takes_what_the_size_allows(ec2: EC2Client, request_: dict[str, Any]) -> None:
    ec2.create_volume(AvailabilityZone="us-east-1a", **request_)
    assert len(ec2.describe_volumes()["Volumes"]) == 1


def test_right_after_a_create_ec2_may_not_see_the_new_resource_yet(
    ec2: EC2Client, double: AwsDouble
) -> None:
    double.eventually_consistent(calls=2)
    volume_id = ec2.create_volume(AvailabilityZone="us-east-1a", Size=8)["VolumeId"]
    tags = [{"Key": "k", "Value": "v"}]
    for _ in range(2):
        with pytest.raises(ClientError) as info:
            ec2.create_tags(Resources=[volume_id], Tags=tags)
        assert error_code(info) == "InvalidVolume.NotFound"
    ec2.create_tags(Resources=[volume_id], Tags=tags)
    (seen,) = ec2.describe_volumes(VolumeIds=[volume_id])["Volumes"]
    assert seen["Tags"] == tags
    other = ec2.create_volume(AvailabilityZone="us-east-1a", Size=8)["VolumeId"]
    listed = [v["VolumeId"] for v in ec2.describe_volumes()["Volumes"]]
    assert (volume_id in listed, other in listed) == (True, False)


def test_attach_refuses_a_volume_in_another_zone(
    ec2: EC2Client, clock: VirtualClock, host: Host
) -> None:
    other = ec2.create_volume(AvailabilityZone="us-east-1b", Size=8)["VolumeId"]
    clock.advance(10)
    with pytest.raises(ClientError) as info:
        ec2.attach_volume(VolumeId=other, InstanceId=host.instance_id, Device="/dev/sdz")
    assert error_code(info) == "InvalidVolume.ZoneMismatch"


def test_attach_refuses_a_volume_still_creating(ec2: EC2Client, host: Host) -> None:
    fresh = ec2.create_volume(AvailabilityZone="us-east-1a", Size=8)["VolumeId"]
    with pytest.raises(ClientError) as info:
        ec2.attach_volume(VolumeId=fresh, InstanceId=host.instance_id, Device="/dev/sdz")
    assert error_code(info) == "IncorrectState"


def test_attach_refuses_a_device_name_in_use(
    ec2: EC2Client, clock: VirtualClock, host: Host
) -> None:
    spare = ec2.create_volume(AvailabilityZone="us-east-1a", Size=8)["VolumeId"]
    clock.advance(10)
    with pytest.raises(ClientError) as info:
        ec2.attach_volume(VolumeId=spare, InstanceId=host.instance_id, Device="/dev/sdf")
    assert error_code(info) == "InvalidParameterValue"
    assert "Attachment point /dev/sdf is already in use" in str(info.value)


def test_attach_refuses_a_volume_already_attached(ec2: EC2Client, host: Host) -> None:
    with pytest.raises(ClientError) as info:
        ec2.attach_volume(
            VolumeId=host.data_volumes[0], InstanceId=host.instance_id, Device="/dev/sdz"
        )
    assert error_code(info) == "VolumeInUse"


def test_attachment_is_attaching_then_attached(
    ec2: EC2Client, clock: VirtualClock, host: Host
) -> None:
    spare = ec2.create_volume(AvailabilityZone="us-east-1a", Size=8)["VolumeId"]
    clock.advance(10)
    answer = ec2.attach_volume(VolumeId=spare, InstanceId=host.instance_id, Device="/dev/sdz")
    assert answer["State"] == "attaching"
    assert volume(ec2, spare)["Attachments"][0]["State"] == "attaching"
    clock.advance(3)
    described = volume(ec2, spare)
    assert (described["State"], described["Attachments"][0]["State"]) == ("in-use", "attached")


def test_detach_without_instance_id_is_detaching_then_available(
    ec2: EC2Client, clock: VirtualClock, host: Host
) -> None:
    answer = ec2.detach_volume(VolumeId=host.data_volumes[0])
    assert (answer["State"], answer["InstanceId"], answer["Device"]) == (
        "detaching",
        host.instance_id,
        "/dev/sdf",
    )
    assert volume(ec2, host.data_volumes[0])["Attachments"][0]["State"] == "detaching"
    with pytest.raises(ClientError) as info:
        ec2.delete_volume(VolumeId=host.data_volumes[0])
    assert error_code(info) == "VolumeInUse"
    clock.advance(5)
    detached = volume(ec2, host.data_volumes[0])
    assert (detached["State"], detached["Attachments"]) == ("available", [])


def test_delete_of_an_attached_volume_is_volume_in_use(ec2: EC2Client, host: Host) -> None:
    with pytest.raises(ClientError) as info:
        ec2.delete_volume(VolumeId=host.data_volumes[1])
    assert error_code(info) == "VolumeInUse"


# ---------------------------------------------------------------------------- FSR


def test_fsr_goes_enabling_optimizing_enabled_then_disabling_disabled(
    ec2: EC2Client, clock: VirtualClock, double: AwsDouble, host: Host
) -> None:
    snapshot_id = completed_snapshot(ec2, clock, double, host.data_volumes[0])

    def state() -> str:
        answer = ec2.describe_fast_snapshot_restores(
            Filters=[{"Name": "snapshot-id", "Values": [snapshot_id]}]
        )
        return str(answer["FastSnapshotRestores"][0]["State"])

    enabled = ec2.enable_fast_snapshot_restores(
        AvailabilityZones=["us-east-1a"], SourceSnapshotIds=[snapshot_id]
    )
    assert enabled["Unsuccessful"] == []
    item = enabled["Successful"][0]
    assert (item["State"], item["StateTransitionReason"]) == ("enabling", "Client.UserInitiated")
    clock.advance(60)
    assert state() == "optimizing"
    clock.advance(8 * 3600 / 1024)
    assert state() == "enabled"
    again = ec2.enable_fast_snapshot_restores(
        AvailabilityZones=["us-east-1a"], SourceSnapshotIds=[snapshot_id]
    )
    assert again["Successful"][0]["State"] == "enabled"
    # The pair's volume creation credit bucket starts empty once enabled and fills at
    # MIN(10, 1024 / GiB) = 10 credits an hour for this snapshot: one credit after 6 minutes
    clock.advance(3600 / 10)
    fast = ec2.create_volume(AvailabilityZone="us-east-1a", SnapshotId=snapshot_id)["VolumeId"]
    slow = ec2.create_volume(AvailabilityZone="us-east-1b", SnapshotId=snapshot_id)["VolumeId"]
    assert (volume(ec2, fast)["FastRestored"], volume(ec2, slow)["FastRestored"]) == (True, False)
    disabled = ec2.disable_fast_snapshot_restores(
        AvailabilityZones=["us-east-1a"], SourceSnapshotIds=[snapshot_id]
    )
    assert disabled["Successful"][0]["State"] == "disabling"
    clock.advance(30)
    assert state() == "disabled"


def test_fsr_for_unknown_snapshot_or_zone_is_reported_unsuccessful(
    ec2: EC2Client, clock: VirtualClock, double: AwsDouble, host: Host
) -> None:
    snapshot_id = completed_snapshot(ec2, clock, double, host.data_volumes[0])
    answer = ec2.enable_fast_snapshot_restores(
        AvailabilityZones=["us-east-1a", "us-east-1z"],
        SourceSnapshotIds=[snapshot_id, "snap-0123456789abcdef0"],
    )
    assert [(s["SnapshotId"], s["AvailabilityZone"]) for s in answer["Successful"]] == [
        (snapshot_id, "us-east-1a")
    ]
    errors = {
        (u["SnapshotId"], e["AvailabilityZone"]): e["Error"]["Code"]
        for u in answer["Unsuccessful"]
        for e in u["FastSnapshotRestoreStateErrors"]
    }
    assert errors[(snapshot_id, "us-east-1z")] == "InvalidParameterValue"
    assert errors[("snap-0123456789abcdef0", "us-east-1a")] == "InvalidSnapshot.NotFound"


def test_describe_fsr_filters_by_zone_and_state_and_paginates(
    ec2: EC2Client, clock: VirtualClock, double: AwsDouble, host: Host
) -> None:
    snapshot_id = completed_snapshot(ec2, clock, double, host.data_volumes[0])
    ec2.enable_fast_snapshot_restores(
        AvailabilityZones=["us-east-1a", "us-east-1b", "us-east-1c"],
        SourceSnapshotIds=[snapshot_id],
    )
    answer = ec2.describe_fast_snapshot_restores(
        Filters=[
            {"Name": "availability-zone", "Values": ["us-east-1b"]},
            {"Name": "state", "Values": ["enabling"]},
        ]
    )
    assert [r["AvailabilityZone"] for r in answer["FastSnapshotRestores"]] == ["us-east-1b"]
    pages = list(
        ec2.get_paginator("describe_fast_snapshot_restores").paginate(
            PaginationConfig={"PageSize": 2}
        )
    )
    assert [len(p["FastSnapshotRestores"]) for p in pages] == [2, 1]


def test_stuck_fsr_never_leaves_its_state(
    ec2: EC2Client, clock: VirtualClock, double: AwsDouble, host: Host
) -> None:
    snapshot_id = completed_snapshot(ec2, clock, double, host.data_volumes[0])
    double.stick_fsr("optimizing")
    ec2.enable_fast_snapshot_restores(
        AvailabilityZones=["us-east-1a"], SourceSnapshotIds=[snapshot_id]
    )
    clock.advance(86400)
    states = ec2.describe_fast_snapshot_restores()["FastSnapshotRestores"]
    assert [s["State"] for s in states] == ["optimizing"]


# ---------------------------------------------------------------------------- SSM

DOCUMENT = {
    "schemaVersion": "2.2",
    "description": "assemble",
    "parameters": {
        "VolumeIds": {"type": "String", "allowedPattern": "^vol-[0-9a-f]+(,vol-[0-9a-f]+)*$"},
        "MountPoint": {"type": "String", "default": "/mnt/md0", "allowedPattern": "^/[\\w/]+$"},
    },
    "mainSteps": [
        {"action": "aws:runShellScript", "name": "assemble", "inputs": {"runCommand": ["true"]}}
    ],
}


@pytest.fixture
def assemble_document(ssm: SSMClient) -> str:
    name = "RaidsnapStack-Assemble"
    ssm.create_document(
        Name=name, Content=json.dumps(DOCUMENT), DocumentType="Command", DocumentFormat="JSON"
    )
    return name


def test_send_command_to_an_offline_or_unknown_instance_is_invalid_instance_id(
    ssm: SSMClient, double: AwsDouble, host: Host
) -> None:
    double.set_agent(host.instance_id, online=False)
    for instance_id in (host.instance_id, "i-0000000000000dead"):
        with pytest.raises(ssm.exceptions.InvalidInstanceId):
            ssm.send_command(
                InstanceIds=[instance_id],
                DocumentName="AWS-RunShellScript",
                Parameters={"commands": ["true"]},
            )
    assert double.mutating_calls("ssm") == []


def test_describe_instance_information_reports_agents_online_and_lost(
    ssm: SSMClient, double: AwsDouble, host: Host, ec2: EC2Client, clock: VirtualClock
) -> None:
    other = launch_host(ec2, clock, zone="us-east-1b")
    double.set_agent(other.instance_id, online=False)
    infos = ssm.describe_instance_information()["InstanceInformationList"]
    assert {i["InstanceId"]: i["PingStatus"] for i in infos} == {
        host.instance_id: "Online",
        other.instance_id: "ConnectionLost",
    }
    filtered = ssm.describe_instance_information(
        Filters=[{"Key": "InstanceIds", "Values": [host.instance_id]}]
    )["InstanceInformationList"]
    assert [(i["InstanceId"], i["PlatformType"]) for i in filtered] == [(host.instance_id, "Linux")]


def test_command_is_in_progress_for_its_duration_then_reports_the_responders_outcome(
    ssm: SSMClient, double: AwsDouble, clock: VirtualClock, host: Host, assemble_document: str
) -> None:
    seen: list[CommandContext] = []

    def responder(context: CommandContext) -> CommandOutcome:
        seen.append(context)
        return CommandOutcome(
            "Failed",
            stdout="x" * 30000,
            stderr="mdadm: no array\n" * 1000,
            exit_code=2,
            duration_seconds=20,
        )

    double.on_command("Assemble", responder)
    sent = ssm.send_command(
        InstanceIds=[host.instance_id],
        DocumentName=assemble_document,
        Parameters={"VolumeIds": [",".join(host.data_volumes)]},
    )["Command"]
    assert seen[0].parameters == {"VolumeIds": [",".join(host.data_volumes)]}
    assert seen[0].command_id == sent["CommandId"]
    running = ssm.get_command_invocation(CommandId=sent["CommandId"], InstanceId=host.instance_id)
    assert (running["Status"], running["StandardOutputContent"]) == ("InProgress", "")
    clock.advance(20)
    done = ssm.get_command_invocation(CommandId=sent["CommandId"], InstanceId=host.instance_id)
    assert (done["Status"], done["StatusDetails"], done["ResponseCode"]) == ("Failed", "Failed", 2)
    assert len(done["StandardOutputContent"]) == 24000
    assert len(done["StandardErrorContent"]) == 8000
    # A prefix, as the agent keeps it: the start of what was written, then the agent's marker.
    assert done["StandardErrorContent"].startswith("mdadm: no array\nmdadm: no array\n")
    assert done["StandardErrorContent"].endswith("mdadm: no ar--output truncated--")
    listed = ssm.list_command_invocations(CommandId=sent["CommandId"], Details=True)
    plugin = listed["CommandInvocations"][0]["CommandPlugins"][0]
    assert (plugin["Name"], plugin["Status"], len(plugin["Output"])) == ("assemble", "Failed", 2500)
    assert ssm.list_commands(CommandId=sent["CommandId"])["Commands"][0]["Status"] == "Failed"


def test_document_without_responder_succeeds_with_empty_output(
    ssm: SSMClient, double: AwsDouble, host: Host
) -> None:
    sent = ssm.send_command(
        InstanceIds=[host.instance_id],
        DocumentName="AWS-RunShellScript",
        Parameters={"commands": ["true"]},
    )["Command"]
    done = ssm.get_command_invocation(CommandId=sent["CommandId"], InstanceId=host.instance_id)
    assert (done["Status"], done["ResponseCode"], done["StandardOutputContent"]) == (
        "Success",
        0,
        "",
    )


def test_responder_is_matched_by_exact_name_or_by_the_end_of_the_sent_name(
    ssm: SSMClient, double: AwsDouble, host: Host, assemble_document: str
) -> None:
    double.on_command("ble", lambda _c: CommandOutcome(stdout="short"))
    double.on_command("Assemble", lambda _c: CommandOutcome(stdout="long"))
    sent = ssm.send_command(
        InstanceIds=[host.instance_id],
        DocumentName=assemble_document,
        Parameters={"VolumeIds": ["vol-0abc"]},
    )["Command"]
    done = ssm.get_command_invocation(CommandId=sent["CommandId"], InstanceId=host.instance_id)
    assert done["StandardOutputContent"] == "long"


def test_unknown_document_is_invalid_document(ssm: SSMClient, host: Host) -> None:
    with pytest.raises(ssm.exceptions.InvalidDocument):
        ssm.send_command(InstanceIds=[host.instance_id], DocumentName="NoSuchDocument")


def test_parameters_are_checked_against_the_document(
    ssm: SSMClient, host: Host, assemble_document: str
) -> None:
    for parameters in ({"VolumeIds": ["vol-1; rm -rf /"]}, {"Bogus": ["x"]}, {}):
        with pytest.raises(ssm.exceptions.InvalidParameters):
            ssm.send_command(
                InstanceIds=[host.instance_id],
                DocumentName=assemble_document,
                Parameters=parameters,
            )


def test_unknown_invocation_does_not_exist(ssm: SSMClient, host: Host) -> None:
    with pytest.raises(ssm.exceptions.InvocationDoesNotExist):
        ssm.get_command_invocation(
            CommandId="00000000-0000-0000-0000-000000000000", InstanceId=host.instance_id
        )


def test_command_longer_than_execution_timeout_times_out(
    ssm: SSMClient, double: AwsDouble, clock: VirtualClock, host: Host
) -> None:
    double.on_command("AWS-RunShellScript", lambda _c: CommandOutcome(duration_seconds=7200))
    sent = ssm.send_command(
        InstanceIds=[host.instance_id],
        DocumentName="AWS-RunShellScript",
        Parameters={"commands": ["sleep 7200"], "executionTimeout": ["600"]},
    )["Command"]
    clock.advance(600)
    done = ssm.get_command_invocation(CommandId=sent["CommandId"], InstanceId=host.instance_id)
    assert (done["Status"], done["StatusDetails"]) == ("TimedOut", "ExecutionTimedOut")


@pytest.mark.parametrize(
    "case",
    [
        (600, {}, 600),  # a number, as raidsnap's documents give it
        ("{{ Limit }}", {"Limit": ["900"]}, 900),  # a parameter, as AWS-RunShellScript does
        ("{{ Limit }}", {}, 1200),  # that parameter's default
        (None, {}, 3600),  # none: the agent's default
        (2, {}, 3600),  # below the agent's minimum of 5: its default
        (200_000, {}, 3600),  # above its maximum of 172,800: its default
    ],
)
def test_the_agent_ends_a_step_at_the_documents_timeout_seconds(
    ssm: SSMClient,
    double: AwsDouble,
    clock: VirtualClock,
    host: Host,
    case: tuple[int | str | None, dict[str, list[str]], int],
) -> None:
    timeout, parameters, ends_at = case
    inputs: dict[str, object] = {"runCommand": ["sleep 10000"]}
    if timeout is not None:
        inputs["timeoutSeconds"] = timeout
    content = {
        "schemaVersion": "2.2",
        "description": "sleeps",
        "parameters": {"Limit": {"type": "String", "default": "1200"}},
        "mainSteps": [{"action": "aws:runShellScript", "name": "sleep", "inputs": inputs}],
    }
    ssm.create_document(
        Name="Sleeper", Content=json.dumps(content), DocumentType="Command", DocumentFormat="JSON"
    )
    double.on_command("Sleeper", lambda _c: CommandOutcome(duration_seconds=10_000))
    sent = ssm.send_command(
        InstanceIds=[host.instance_id], DocumentName="Sleeper", Parameters=parameters
    )["Command"]

    def status() -> tuple[str, str]:
        inv = ssm.get_command_invocation(CommandId=sent["CommandId"], InstanceId=host.instance_id)
        return inv["Status"], inv["StatusDetails"]

    clock.advance(ends_at - 1)
    assert status() == ("InProgress", "InProgress")
    clock.advance(1)
    assert status() == ("TimedOut", "ExecutionTimedOut")


def test_an_agent_that_stops_reporting_leaves_the_command_in_progress(
    ssm: SSMClient, double: AwsDouble, clock: VirtualClock, host: Host, assemble_document: str
) -> None:
    # No agent is left to enforce the step's timeout: only CancelCommand ends the invocation.
    double.on_command(
        "Assemble", lambda _c: CommandOutcome(duration_seconds=100_000, unresponsive=True)
    )
    sent = ssm.send_command(
        InstanceIds=[host.instance_id],
        DocumentName=assemble_document,
        Parameters={"VolumeIds": [",".join(host.data_volumes)]},
    )["Command"]
    clock.advance(7200)
    inv = ssm.get_command_invocation(CommandId=sent["CommandId"], InstanceId=host.instance_id)
    assert inv["Status"] == "InProgress"


def test_cancelled_command_reports_cancelled(
    ssm: SSMClient, double: AwsDouble, clock: VirtualClock, host: Host
) -> None:
    double.on_command("AWS-RunShellScript", lambda _c: CommandOutcome(duration_seconds=60))
    sent = ssm.send_command(
        InstanceIds=[host.instance_id],
        DocumentName="AWS-RunShellScript",
        Parameters={"commands": ["true"]},
    )["Command"]
    ssm.cancel_command(CommandId=sent["CommandId"])
    clock.advance(60)
    done = ssm.get_command_invocation(CommandId=sent["CommandId"], InstanceId=host.instance_id)
    assert done["Status"] == "Cancelled"


# ---------------------------------------------------------------------------- faults, calls


def test_throttle_raises_request_limit_exceeded_503_and_changes_nothing(
    ec2: EC2Client, double: AwsDouble
) -> None:
    double.throttle("ec2", "CreateVolume", times=2)
    for _ in range(2):
        with pytest.raises(ClientError) as info:
            ec2.create_volume(AvailabilityZone="us-east-1a", Size=8)
        assert error_code(info) == "RequestLimitExceeded"
        assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert ec2.describe_volumes()["Volumes"] == []
    ec2.create_volume(AvailabilityZone="us-east-1a", Size=8)
    assert [c.error_code for c in double.calls if c.operation == "CreateVolume"] == [
        "RequestLimitExceeded",
        "RequestLimitExceeded",
        None,
    ]


def test_fail_after_success_changes_state_but_reports_failure(
    ec2: EC2Client, double: AwsDouble
) -> None:
    double.fail("ec2", "CreateVolume", after_success=True)
    with pytest.raises(ClientError) as info:
        ec2.create_volume(AvailabilityZone="us-east-1a", Size=8, ClientToken="retry-me")
    assert error_code(info) == "InternalError"
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    assert len(ec2.describe_volumes()["Volumes"]) == 1
    ec2.create_volume(AvailabilityZone="us-east-1a", Size=8, ClientToken="retry-me")
    assert len(ec2.describe_volumes()["Volumes"]) == 1
    assert [c.operation for c in double.mutating_calls()] == ["CreateVolume", "CreateVolume"]


def test_fail_before_reaching_aws_is_not_a_mutating_call(ec2: EC2Client, double: AwsDouble) -> None:
    double.fail("ec2", "CreateVolume", code="Unavailable", message="try later")
    with pytest.raises(ClientError) as info:
        ec2.create_volume(AvailabilityZone="us-east-1a", Size=8)
    assert info.value.response["Error"]["Message"] == "try later"
    assert double.mutating_calls() == []


def test_throttle_everything_throttles_each_operation_once_the_first_time(
    ec2: EC2Client, double: AwsDouble
) -> None:
    double.throttle_everything("ec2")
    for call in (ec2.describe_volumes, ec2.describe_snapshots):
        with pytest.raises(ClientError) as info:
            call()
        assert error_code(info) == "RequestLimitExceeded"
        call()
    ec2.describe_volumes()


def test_route_answers_lambda_invoke_in_process_and_passes_its_errors(double: AwsDouble) -> None:
    def invoke(params: dict[str, Any]) -> dict[str, Any]:
        if params["FunctionName"] == "broken":
            raise ClientError(
                {"Error": {"Code": "ResourceNotFoundException", "Message": "no"}}, "Invoke"
            )
        return {"StatusCode": 200, "Payload": params["Payload"]}

    double.route("lambda", "Invoke", invoke)
    client = boto3.client("lambda")
    assert client.invoke(FunctionName="ok", Payload=b"{}")["StatusCode"] == 200
    with pytest.raises(ClientError) as info:
        client.invoke(FunctionName="broken", Payload=b"{}")
    assert error_code(info) == "ResourceNotFoundException"


def test_calls_from_another_thread_are_seen_and_recorded(
    ec2: EC2Client, double: AwsDouble, clock: VirtualClock
) -> None:
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            client = boto3.client("ec2", region_name="us-east-1")
            for index in range(5):
                client.create_volume(AvailabilityZone="us-east-1a", Size=8, ClientToken=f"w{index}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(double.mutating_calls()) == 15
    assert len(ec2.describe_volumes()["Volumes"]) == 5
    assert {v["State"] for v in ec2.describe_volumes()["Volumes"]} == {"creating"}


def test_the_executors_aws_sdk_integrations_go_through_the_double(
    double: AwsDouble, clock: VirtualClock, ec2: EC2Client, host: Host
) -> None:
    double.throttle("ec2", "CreateSnapshot")
    definition = {
        "StartAt": "Snap",
        "States": {
            "Snap": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:ec2:createSnapshot",
                "Parameters": {"VolumeId": host.data_volumes[0]},
                "ResultSelector": {"SnapshotId.$": "$.SnapshotId"},
                "Retry": [{"ErrorEquals": ["States.ALL"], "IntervalSeconds": 1, "MaxAttempts": 2}],
                "End": True,
            }
        },
    }
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    machine = sfn.create_state_machine(
        name="snap",
        definition=json.dumps(definition),
        roleArn="arn:aws:iam::123456789012:role/sfn",
    )["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=machine, name="run-1")["executionArn"]
    for _ in range(200):
        status = sfn.describe_execution(executionArn=execution)["status"]
        if status != "RUNNING":
            break
        threading.Event().wait(0.05)
    assert status == "SUCCEEDED"
    attempts = [c.error_code for c in double.calls if c.operation == "CreateSnapshot"]
    assert attempts == ["RequestLimitExceeded", None]
    pending = ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]
    assert [s["State"] for s in pending] == ["pending"]


def test_delete_tags_without_tags_deletes_every_user_defined_tag(
    ec2: EC2Client, host: Host
) -> None:
    # DeleteTags API reference, Tag.N: "If you omit this parameter, we delete all user-defined
    # tags for the specified resources." moto alone deletes none.
    ec2.create_tags(
        Resources=[host.instance_id],
        Tags=[{"Key": "CostCenter", "Value": "42"}, {"Key": "raidsnap:array", "Value": "db1"}],
    )

    ec2.delete_tags(Resources=[host.instance_id])

    left = ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [host.instance_id]}])
    assert left["Tags"] == []


@pytest.mark.parametrize("subject", ["two\nlines", "escape \x1b[31m", "x" * 100])
def test_sns_publish_refuses_a_subject_aws_refuses(double: AwsDouble, subject: str) -> None:
    sns = boto3.client("sns", region_name="us-east-1")
    topic = sns.create_topic(Name="t")["TopicArn"]
    with pytest.raises(ClientError) as info:
        sns.publish(TopicArn=topic, Subject=subject, Message="m")
    assert error_code(info) == "InvalidParameter"
    # one line of printable text shorter than 100 characters goes out
    assert sns.publish(TopicArn=topic, Subject="y" * 99, Message="m")["MessageId"]
