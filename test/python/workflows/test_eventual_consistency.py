"""Right after CreateSnapshots or CreateVolume, EC2 may not see the new resource yet: CreateTags
and a Describe by id answer *.NotFound, a Describe by filter leaves it out ("Eventual
consistency in the Amazon EC2 API", EC2 Developer Guide). The workflows retry that, take one
set or one volume per member all the same, and leave nothing untagged."""

from __future__ import annotations

import boto3

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    backed_up,
    launch_instance,
    make_array,
    name_in_config,
    terminate,
)


def applied(emu: Emulation, operation: str, since: int = 0) -> int:
    return sum(1 for c in emu.double.calls[since:] if c.operation == operation and c.applied)


def test_a_backup_while_ec2_lags_takes_one_fully_tagged_set(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3)
    emu.double.eventually_consistent(calls=2)
    run = emu.run("backup", {"array": "db1"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert applied(emu, "CreateSnapshots") == 1
    snapshots = boto3.client("ec2").describe_snapshots(SnapshotIds=run.output["snapshotIds"])
    for snap in snapshots["Snapshots"]:
        tags = {t["Key"]: t["Value"] for t in snap.get("Tags", [])}
        assert tags["raidsnap:set-id"] == run.output["setId"], snap["SnapshotId"]
        assert tags["raidsnap:source-volume"] == snap["VolumeId"]
    assert sorted(s["VolumeId"] for s in snapshots["Snapshots"]) == sorted(fx.member_ids)


def test_a_restore_while_ec2_lags_creates_one_tagged_volume_per_member(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    terminate(fx.instance_id)
    target = launch_instance("db1-new", fx.availability_zone, tag_array=False)
    name_in_config(emu, "db1", target)
    mark = len(emu.double.calls)
    emu.double.eventually_consistent(calls=2)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert applied(emu, "CreateVolume", mark) == 3
    volumes = boto3.client("ec2").describe_volumes(VolumeIds=run.output["volumeIds"])["Volumes"]
    for vol in volumes:
        tags = {t["Key"]: t["Value"] for t in vol.get("Tags", [])}
        assert tags["raidsnap:restore-execution"] == run.arn
        assert [a["InstanceId"] for a in vol["Attachments"]] == [target]
    md = emu.hosts.state(target).arrays["/dev/md0"]
    assert md.members == run.output["volumeIds"]
