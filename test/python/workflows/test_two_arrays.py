"""Two arrays on one instance: db1 (md0 at /data, the instance's ``raidsnap:array=db1``) and
logs (md1 at /logs, named by the per-array tag ``raidsnap:array:logs=<its md UUID>``). Every
workflow acts on its own array only: the other stays assembled, mounted, attached and
untouched."""

from __future__ import annotations

import json

import boto3

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    ArrayFixture,
    alarm_event,
    backed_up,
    configure_recovery,
    make_array,
    sets_of,
    tags_of,
)


def with_logs(emu: Emulation, fx: ArrayFixture) -> tuple[list[str], str]:
    """logs: two more volumes of the instance as /dev/md1 at /logs, tagged on the instance by
    its md UUID."""
    ec2 = boto3.client("ec2")
    ids = [
        ec2.create_volume(AvailabilityZone=fx.availability_zone, Size=8)["VolumeId"]
        for _ in range(2)
    ]
    emu.clock.advance(emu.double.volume_seconds + 1)
    for vid, letter in zip(ids, "xy", strict=True):
        ec2.attach_volume(VolumeId=vid, InstanceId=fx.instance_id, Device=f"/dev/sd{letter}")
    emu.clock.advance(emu.double.attach_seconds + 1)
    uuid = emu.hosts.build_array(
        fx.instance_id, ids, name="logs", md_device="/dev/md1", mount_point="/logs"
    )
    ec2.create_tags(
        Resources=[fx.instance_id], Tags=[{"Key": "raidsnap:array:logs", "Value": uuid}]
    )
    return ids, uuid


def detached(emu: Emulation) -> set[str]:
    return {
        str(c.params["VolumeId"])
        for c in emu.double.calls
        if c.operation == "DetachVolume" and c.applied
    }


def test_each_array_backs_up_its_own_members_only(emu: Emulation) -> None:
    # GIVEN db1 (md0, /data) and logs (md1, /logs) on one instance
    fx = make_array(emu.hosts, "db1", 3, unrelated=0)
    logs, logs_uuid = with_logs(emu, fx)
    # WHEN each is backed up
    run = emu.run("backup", {"array": "logs"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    db1_set = backed_up(emu.hosts, emu.run, fx)
    # THEN each set holds its own array's members, with its own md facts
    (logs_set,) = sets_of("logs").values()
    assert {tags_of(s)["raidsnap:source-volume"] for s in logs_set} == set(logs)
    assert {tags_of(s)["raidsnap:md-uuid"] for s in logs_set} == {logs_uuid}
    assert {tags_of(s)["raidsnap:mount-point"] for s in logs_set} == {"/logs"}
    db1 = sets_of("db1")[db1_set]
    assert {tags_of(s)["raidsnap:source-volume"] for s in db1} == set(fx.member_ids)
    assert {tags_of(s)["raidsnap:md-device"] for s in db1} == {"/dev/md0"}


def test_replace_of_one_array_leaves_the_other_mounted_and_attached(emu: Emulation) -> None:
    # GIVEN both arrays backed up
    fx = make_array(emu.hosts, "db1", 3, unrelated=0)
    logs, logs_uuid = with_logs(emu, fx)
    assert emu.run("backup", {"array": "logs"}).status == "SUCCEEDED"
    backed_up(emu.hosts, emu.run, fx)
    # WHEN db1 is replaced in place (its release runs on the instance)
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    # THEN only db1's members left; logs is assembled, mounted and attached as it was
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert detached(emu) == set(fx.member_ids)
    arrays = emu.hosts.state(fx.instance_id).arrays
    md1 = arrays["/dev/md1"]
    assert (md1.md_uuid, md1.members, md1.mount_point) == (logs_uuid, logs, "/logs")
    assert arrays["/dev/md0"].members == run.output["volumeIds"]
    ec2 = boto3.client("ec2")
    for vol in ec2.describe_volumes(VolumeIds=logs)["Volumes"]:
        assert vol["Attachments"][0]["InstanceId"] == fx.instance_id
        assert "raidsnap:replaced-by" not in tags_of(vol)
    # AND a later backup of logs still finds logs (its tag still names it)
    again = emu.run("backup", {"array": "logs"})
    assert again.status == "SUCCEEDED", f"{again.error}: {again.cause}"


def test_a_lost_member_of_md1_recovers_logs_only(emu: Emulation) -> None:
    # GIVEN both arrays backed up, logs with recovery configured on this instance
    fx = make_array(emu.hosts, "db1", 3, unrelated=0)
    logs, logs_uuid = with_logs(emu, fx)
    assert emu.run("backup", {"array": "logs"}).status == "SUCCEEDED"
    backed_up(emu.hosts, emu.run, fx)
    configure_recovery(emu, "logs", instanceId=fx.instance_id, initialization="none")
    db1_before = emu.hosts.state(fx.instance_id).arrays["/dev/md0"]
    db1_state = (db1_before.md_uuid, list(db1_before.members), db1_before.mount_point)
    # AND one member of md1 is lost
    emu.hosts.lose_member(fx.instance_id, logs[1])
    # WHEN logs' attached EBS alarm fires
    started = emu.invoke(
        "recovery_start", alarm_event(fx.instance_id, alarm_name="raidsnap-attached-ebs-logs")
    )
    assert started.error_type is None, started.error_message
    assert started.result["array"] == "logs", started.result
    run = emu.wait(started.result["executionArn"])
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    # (its evidence names the array each impaired member belongs to)
    assert run.output["evidence"], run.output
    assert all(line.startswith("logs: ") for line in run.output["evidence"]), run.output
    restores = boto3.client("stepfunctions").list_executions(
        stateMachineArn=emu.state_machines["restore"]
    )["executions"]
    for restore in restores:
        assert emu.wait(restore["executionArn"]).status == "SUCCEEDED"
    # THEN md1 was restored from logs' set; md0 and db1's members are untouched
    arrays = emu.hosts.state(fx.instance_id).arrays
    md0 = arrays["/dev/md0"]
    assert (md0.md_uuid, md0.members, md0.mount_point) == db1_state
    assert arrays["/dev/md1"].mount_point == "/logs"
    assert not set(arrays["/dev/md1"].members) & set(logs)
    assert arrays["/dev/md1"].md_uuid != logs_uuid  # the restored copy's own identity
    assert not detached(emu) & set(fx.member_ids)


def test_the_alarm_that_fired_names_the_array_of_an_instance_with_two(emu: Emulation) -> None:
    # GIVEN both arrays configured for recovery on one instance, each with its own alarm
    fx = make_array(emu.hosts, "db1", 3, unrelated=0)
    logs, _ = with_logs(emu, fx)
    assert emu.run("backup", {"array": "logs"}).status == "SUCCEEDED"
    backed_up(emu.hosts, emu.run, fx)
    configure_recovery(emu, "db1", instanceId=fx.instance_id, initialization="none")
    configure_recovery(emu, "logs", instanceId=fx.instance_id, initialization="none")
    alarms = {"db1": "raidsnap-attached-ebs-db1", "logs": "raidsnap-attached-ebs-logs"}
    for fn in emu.router.functions.values():
        if fn.handler.endswith("recovery_start.handler"):
            fn.environment["ALARM_BY_ARRAY"] = json.dumps(alarms)
    emu.hosts.lose_member(fx.instance_id, logs[0])
    # WHEN logs' alarm fires
    started = emu.invoke(
        "recovery_start", alarm_event(fx.instance_id, alarm_name="raidsnap-attached-ebs-logs")
    )
    # THEN the recovery started is logs', not db1's (the first configured on the instance)
    assert started.error_type is None, started.error_message
    assert started.result["array"] == "logs", started.result
    assert emu.wait(started.result["executionArn"]).status == "SUCCEEDED"
