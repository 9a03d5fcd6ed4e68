"""What a restore owns is its own run's: execution names are unique for 90 days only, so a later
execution of the same name has the same ARN as an earlier one whose volumes may be a live array.
Ownership is the run's nonce (raidsnap:restore-run, also in every ClientToken), never the ARN
alone; the failure path, the clean-up after a stopped run and a drill's teardown all go by it."""

from __future__ import annotations

from typing import Any

import boto3

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation, Execution
from raidsnap_emulation.world import (
    ArrayFixture,
    HeldStep,
    backed_up,
    launch_instance,
    make_array,
    restored_volumes,
    tags_of,
)

REMOVALS = ("DetachVolume", "DeleteVolume")


def live_restore(emu: Emulation, name: str) -> tuple[ArrayFixture, Execution]:
    """db1, backed up and then replaced in place by a restore called ``name``, whose volumes
    are now the live, mounted array; 90 days later that name is free again."""
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    first = emu.run(
        "restore",
        {"array": "db1", "mode": "replace", "initialization": "none"},
        name=name,
    )
    assert first.status == "SUCCEEDED", f"{first.error}: {first.cause}"
    emu.expire_execution(first.arn)
    return fx, first


def removals_of(emu: Emulation, volume_ids: list[str], since: int) -> list[str]:
    return [
        f"{c.operation} {c.params.get('VolumeId')}"
        for c in emu.double.calls[since:]
        if c.operation in REMOVALS and c.params.get("VolumeId") in volume_ids
    ]


def assert_live(emu: Emulation, fx: ArrayFixture, live: list[str]) -> None:
    views = boto3.client("ec2").describe_volumes(VolumeIds=live)["Volumes"]
    assert [v["State"] for v in views] == ["in-use"] * len(live)
    assert all(v["Attachments"][0]["InstanceId"] == fx.instance_id for v in views)
    md = emu.hosts.state(fx.instance_id).arrays["/dev/md0"]
    assert (md.members, md.failed) == (live, False)


def test_a_reused_execution_name_that_fails_before_creating_anything_cleans_nothing(
    emu: Emulation,
) -> None:
    # GIVEN the live array is the work of a restore called "nightly", 90 days ago
    fx, first = live_restore(emu, "nightly")
    live = first.output["volumeIds"]
    mark = len(emu.double.calls)
    # WHEN a new execution of that name fails in Prepare with bad input
    again = emu.run("restore", {"array": "db1", "mode": "sideways"}, name="nightly")
    # THEN it says nothing changed, and nothing did: the live array is attached and assembled
    assert again.arn == first.arn
    assert (again.status, again.error) == ("FAILED", "InvalidInput")
    assert removals_of(emu, live, mark) == []
    assert_live(emu, fx, live)


def test_a_reused_execution_name_removes_only_the_volumes_of_its_own_run(
    emu: Emulation,
) -> None:
    # GIVEN the live array of an earlier "nightly", and a copy target next to it
    fx, first = live_restore(emu, "nightly")
    live = first.output["volumeIds"]
    copy_host = launch_instance("db1-copy", fx.availability_zone)
    emu.hosts.fail_next(
        "assemble", CommandOutcome(status="Failed", stderr="mdadm: boom", exit_code=1)
    )
    mark = len(emu.double.calls)
    # WHEN a new "nightly" creates and attaches its own volumes there and then fails
    again = emu.run(
        "restore",
        {"array": "db1", "targetInstanceId": copy_host, "initialization": "none"},
        name="nightly",
    )
    assert (again.status, again.error) == ("FAILED", "CommandFailed")
    # THEN it deleted the three volumes of its own run, and nothing of the earlier run
    assert removals_of(emu, live, mark) == []
    assert_live(emu, fx, live)
    created = [c for c in emu.double.calls[mark:] if c.operation == "CreateVolume" and c.applied]
    runs = {
        t["Value"]
        for c in created
        for t in c.params["TagSpecifications"][0]["Tags"]
        if t["Key"] == "raidsnap:restore-run"
    }
    live_runs = {tags_of(v)["raidsnap:restore-run"] for v in restored_volumes(first.arn)}
    assert len(runs) == 1 and len(live_runs) == 1 and runs != live_runs
    deleted = [
        c.params["VolumeId"] for c in emu.double.calls[mark:] if c.operation == "DeleteVolume"
    ]
    assert len(deleted) == 3 and not set(deleted) & set(live)


def status_change(emu: Emulation, execution_arn: str, status: str) -> dict[str, Any]:
    """The EventBridge event Step Functions sends when an execution ends (detail fields from
    the EventBridge reference for Step Functions: startDate and stopDate in epoch ms)."""
    desc = boto3.client("stepfunctions").describe_execution(executionArn=execution_arn)
    return {
        "version": "0",
        "id": "8a3d5c55-6d3a-4b1c-9e1f-1a2b3c4d5e6f",
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "account": "123456789012",
        "time": "2026-11-21T07:30:00Z",
        "region": "us-east-1",
        "resources": [execution_arn],
        "detail": {
            "executionArn": execution_arn,
            "stateMachineArn": emu.state_machines["restore"],
            "name": execution_arn.rsplit(":", 1)[1],
            "status": status,
            "startDate": int(desc["startDate"].timestamp() * 1000),
            "stopDate": int(desc["stopDate"].timestamp() * 1000),
            "input": desc["input"],
            "output": None,
        },
    }


def test_clean_up_after_a_stopped_run_of_a_reused_name_leaves_the_earlier_run_alone(
    emu: Emulation,
) -> None:
    # GIVEN the live array of an earlier "nightly"; the live array is then detached by hand
    # for maintenance (its volumes are available, yet they are the array)
    fx, first = live_restore(emu, "nightly")
    live = first.output["volumeIds"]
    ec2 = boto3.client("ec2")
    for vid in live:
        ec2.detach_volume(VolumeId=vid, InstanceId=fx.instance_id)
    emu.clock.advance(emu.double.detach_seconds + 1)
    # AND a new "nightly" stopped by hand while its volumes are being created
    held = HeldStep(emu, "restore_check_volumes")
    arn = emu.start(
        "restore",
        {"array": "db1", "targetInstanceId": fx.instance_id, "initialization": "none"},
        name="nightly",
    )
    held.wait()
    boto3.client("stepfunctions").stop_execution(executionArn=arn, cause="operator stopped it")
    held.release()
    assert emu.wait(arn).status == "ABORTED"
    emu.clock.advance(emu.double.volume_seconds + 1)
    mark = len(emu.double.calls)
    # WHEN the end of that run reaches the clean-up function
    done = emu.invoke("restore_abandoned", status_change(emu, arn, "ABORTED"))
    # THEN it deleted the three volumes of its own run, and none of the earlier run's
    assert done.error_type is None, done.error_message
    assert len(done.result["deletedVolumeIds"]) == 3
    assert not set(done.result["deletedVolumeIds"]) & set(live)
    assert removals_of(emu, live, mark) == []
    states = {v["VolumeId"]: v["State"] for v in ec2.describe_volumes(VolumeIds=live)["Volumes"]}
    assert set(states.values()) == {"available"}


def test_a_drill_teardown_removes_only_volumes_of_its_own_restore_run(
    emu: Emulation,
) -> None:
    # GIVEN a drill instance, and a volume an earlier run of the drill's restore (same name,
    # 90 days ago) left there
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    host = launch_instance("db1-drill", fx.availability_zone, tag_array=False)
    ec2 = boto3.client("ec2")
    ec2.create_tags(Resources=[host], Tags=[{"Key": "raidsnap:array", "Value": "db1-drill"}])
    drill_arn = emu.state_machines["drill"].replace(":stateMachine:", ":execution:") + ":weekly"
    drill_prepare = emu.invoke(
        "drill_prepare",
        {
            "input": {"array": "db1", "targetInstanceId": host},
            "execution": {"id": drill_arn, "startTime": "2026-11-21T06:00:00.000Z"},
        },
    ).result
    restore_arn = drill_prepare["restoreExecutionArn"]
    earlier = ec2.create_volume(
        AvailabilityZone=fx.availability_zone,
        Size=8,
        TagSpecifications=[
            {
                "ResourceType": "volume",
                "Tags": [
                    {"Key": "raidsnap:restore-execution", "Value": restore_arn},
                    {"Key": "raidsnap:restore-run", "Value": "0123456789abcdef"},
                    {"Key": "raidsnap:array", "Value": "db1"},
                ],
            }
        ],
    )["VolumeId"]
    emu.clock.advance(emu.double.volume_seconds + 1)
    # WHEN a drill of that name runs now (its restore has the same ARN)
    drill = emu.run("drill", {"array": "db1", "targetInstanceId": host}, name="weekly")
    # THEN it passes, and its teardown left the earlier run's volume alone
    assert drill.status == "SUCCEEDED", f"{drill.error}: {drill.cause}"
    assert earlier not in drill.output["deletedVolumeIds"]
    assert len(drill.output["deletedVolumeIds"]) == 2
    (view,) = ec2.describe_volumes(VolumeIds=[earlier])["Volumes"]
    assert view["State"] == "available"
