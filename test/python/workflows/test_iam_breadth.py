"""Grants wider than raidsnap needs: calls a raidsnap role can make, as AWS authorizes them
against the synthesized roles, on resources raidsnap did not create. Each call is one a bug or a
hostile input could make; IAM is the line that should stop it, and here does not."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError

from raidsnap_emulation.double import acting_as
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import launch_instance, tags_of


def role_of(emu: Emulation, prefix: str) -> str:
    return next(f for f in emu.template.of_type("AWS::Lambda::Function") if f.startswith(prefix))


def test_cleanup_may_not_strip_every_tag_from_an_instance_it_never_touched(
    emu: Emulation,
) -> None:
    # GIVEN an instance that has nothing to do with raidsnap, tagged by its owner
    ec2 = boto3.client("ec2")
    instance = launch_instance("billing-db", "us-east-1a", tag_array=False)
    ec2.create_tags(Resources=[instance], Tags=[{"Key": "CostCenter", "Value": "42"}])
    # WHEN the restore's cleanup function calls DeleteTags without Tags: EC2 then deletes every
    # user-defined tag of the resource (DeleteTags API reference, Tag.N). Its grant is
    # "ForAllValues:StringEquals aws:TagKeys [raidsnap:array]" on instance/*, and ForAllValues
    # is true when the request has no aws:TagKeys at all (IAM User Guide, "Multivalued context
    # keys": "The ForAllValues set operator also returns true if there are no context keys in
    # the request"), unless a Null condition requires the key.
    with acting_as(role_of(emu, "RestoreRestoreCleanup")):
        try:
            boto3.client("ec2").delete_tags(Resources=[instance])
            denied = False
        except ClientError as err:
            denied = err.response["Error"]["Code"] == "UnauthorizedOperation"
    left = tags_of(
        ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"][0]
    )
    # THEN IAM refuses it and the owner's tags stay
    assert denied, (
        "DeleteTags with no Tags (on AWS: delete every user-defined tag) was allowed on "
        f"{instance}, tagged {left}"
    )
    assert left == {"Name": "billing-db", "CostCenter": "42"}


@pytest.mark.parametrize(
    ("function", "operation", "params"),
    [
        ("BackupBackupRetention", "delete_snapshot", {}),
        ("BackupBackupSnapshot", "delete_snapshot", {}),
        (
            "RestoreRestoreFsr",
            "enable_fast_snapshot_restores",
            {"AvailabilityZones": ["us-east-1a"]},
        ),
    ],
)
def test_a_snapshot_another_tool_took_of_a_restored_volume_is_not_raidsnaps(
    emu: Emulation, function: str, operation: str, params: dict[str, object]
) -> None:
    # GIVEN a volume a restore created (it carries raidsnap:array by design, and never
    # raidsnap:set-id, so that copies of its tags cannot join a set), and a snapshot that
    # another tool (Data Lifecycle Manager with CopyTags, a script) took of it with its tags
    ec2 = boto3.client("ec2")
    restored_tags = {
        "raidsnap:array": "db1",
        "raidsnap:restored-from": "db1-20260101T000000Z-0a1b2c3d",
        "raidsnap:restored-member-index": "0",
        "raidsnap:restore-execution": (
            "arn:aws:states:us-east-1:123456789012:execution:raidsnap-restore:r1"
        ),
        "raidsnap:restore-run": "n1",
    }
    volume = ec2.create_volume(
        AvailabilityZone="us-east-1a",
        Size=8,
        TagSpecifications=[
            {
                "ResourceType": "volume",
                "Tags": [{"Key": k, "Value": v} for k, v in restored_tags.items()],
            }
        ],
    )["VolumeId"]
    snapshot = ec2.create_snapshot(
        VolumeId=volume,
        TagSpecifications=[
            {
                "ResourceType": "snapshot",
                "Tags": [{"Key": k, "Value": v} for k, v in restored_tags.items()],
            }
        ],
    )["SnapshotId"]
    # WHEN a raidsnap function deletes it, or enables FSR on it (billed per hour)
    call = (
        {"SnapshotId": snapshot}
        if operation == "delete_snapshot"
        else {"SourceSnapshotIds": [snapshot], **params}
    )
    with acting_as(role_of(emu, function)):
        try:
            getattr(boto3.client("ec2"), operation)(**call)
            denied = False
        except ClientError as err:
            denied = err.response["Error"]["Code"] == "UnauthorizedOperation"
    # THEN IAM refuses: the grant should need a key only raidsnap's own set snapshots carry
    # (raidsnap:set-id), not raidsnap:array, which every restored volume passes on
    assert denied, f"{function} was allowed to {operation} a snapshot raidsnap did not take"
