"""A restore stopped by hand (or past its timeout) never reaches its Catch: the rule on its end
sends the event to restore_abandoned, which removes what the run left behind, safely."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    SLOW_EBS_INSTANCE_TYPE,
    HeldStep,
    backed_up,
    launch_instance,
    make_array,
    name_in_config,
    restored_volumes,
    tags_of,
    terminate,
)


def status_change(emu: Emulation, execution_arn: str, status: str) -> dict[str, Any]:
    """The EventBridge event Step Functions sends when an execution ends."""
    desc = boto3.client("stepfunctions").describe_execution(executionArn=execution_arn)
    return {
        "version": "0",
        "id": "315c1398-40ff-a850-213b-158f73e60175",
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
            "stopDate": int(desc.get("stopDate", desc["startDate"]).timestamp() * 1000),
            "input": desc["input"],
            "output": None,
        },
    }


def stop_while_held(emu: Emulation, module: str, payload: dict[str, Any]) -> str:
    """Start a restore, hold it when it reaches ``module``, stop it there, let it end."""
    held = HeldStep(emu, module)
    arn = emu.start("restore", payload, name="stopped-by-hand")
    held.wait()
    boto3.client("stepfunctions").stop_execution(executionArn=arn, cause="operator stopped it")
    held.release()
    assert emu.wait(arn).status == "ABORTED"
    return arn


def lock_holder(emu: Emulation, array: str) -> str | None:
    assert emu.router is not None
    table = next(
        f.environment["LOCK_TABLE"]
        for f in emu.router.functions.values()
        if f.handler.endswith(".restore_abandoned.handler")
    )
    item = boto3.client("dynamodb").get_item(TableName=table, Key={"array": {"S": array}})
    return item.get("Item", {}).get("executionArn", {}).get("S")


def fsr_enabled(snapshot_ids: list[str], zone: str) -> list[str]:
    rows = boto3.client("ec2").describe_fast_snapshot_restores(
        Filters=[{"Name": "availability-zone", "Values": [zone]}]
    )["FastSnapshotRestores"]
    return sorted(
        r["SnapshotId"]
        for r in rows
        if r["SnapshotId"] in snapshot_ids and r["State"] in ("enabling", "optimizing", "enabled")
    )


def test_a_restore_stopped_before_attaching_leaves_nothing_behind(emu: Emulation) -> None:
    # GIVEN a restore with FSR stopped while it creates its volumes (before a replace releases
    # anything: the release follows CreateVolumes)
    fx = make_array(emu.hosts, "db1", 3, instance_type=SLOW_EBS_INSTANCE_TYPE)
    backed_up(emu.hosts, emu.run, fx)
    arn = stop_while_held(
        emu, "restore_create_volumes", {"array": "db1", "mode": "replace", "initialization": "fsr"}
    )
    created = [v["VolumeId"] for v in restored_volumes(arn)]
    assert len(created) == 3
    snapshots = [v["SnapshotId"] for v in restored_volumes(arn)]
    assert fsr_enabled(snapshots, fx.availability_zone) == sorted(snapshots)
    emu.clock.advance(emu.double.volume_seconds + 1)

    # WHEN the end of the run reaches the cleanup function
    done = emu.invoke("restore_abandoned", status_change(emu, arn, "ABORTED"))

    # THEN its volumes are gone, its FSR is off, its lock is free, and the array is untouched
    assert done.error_type is None, done.error_message
    assert sorted(done.result["deletedVolumeIds"]) == sorted(created)
    assert fsr_enabled(snapshots, fx.availability_zone) == []
    assert done.result["lockReleased"] == ["db1"]
    states = {v["VolumeId"]: v["State"] for v in restored_volumes(arn)}
    assert set(states.values()) <= {"deleting", "deleted"}
    md = emu.hosts.state(fx.instance_id).arrays["/dev/md0"]
    assert (md.members, md.failed) == (fx.member_ids, False)
    # AND a new restore of the array can take the lock again
    assert emu.run("restore", {"array": "db1", "mode": "replace"}).status == "SUCCEEDED"


def test_attached_volumes_of_a_stopped_restore_are_left_alone_and_reported(
    emu: Emulation,
) -> None:
    # GIVEN a restore stopped after it attached its volumes (the array may be in use)
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    arn = stop_while_held(emu, "restore_finish", {"array": "db1", "mode": "replace"})
    emu.clock.advance(30)
    created = restored_volumes(arn)
    attached = sorted(v["VolumeId"] for v in created if v["Attachments"])
    assert attached, "the run was stopped after attaching"
    mark = len(emu.double.calls)
    # WHEN the cleanup runs
    done = emu.invoke("restore_abandoned", status_change(emu, arn, "ABORTED"))
    # THEN nothing attached is detached or deleted; it is reported, and the lock is free
    assert done.error_type is None, done.error_message
    assert sorted(done.result["attachedVolumeIds"]) == attached
    touched = [
        c.operation
        for c in emu.double.calls[mark:]
        if c.operation in ("DetachVolume", "DeleteVolume") and c.params.get("VolumeId") in attached
    ]
    assert touched == []
    # (the held step was in flight when the run stopped, and released the lock itself)
    assert lock_holder(emu, "db1") is None


def _array_tag(instance_id: str) -> str | None:
    (reservation,) = boto3.client("ec2").describe_instances(InstanceIds=[instance_id])[
        "Reservations"
    ]
    return tags_of(reservation["Instances"][0]).get("raidsnap:array")


def test_a_restore_stopped_after_tagging_a_new_target_takes_the_tag_off(emu: Emulation) -> None:
    # GIVEN a restore onto a new instance, stopped after its attach step tagged the instance
    # with the array and before it assembled anything there
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    terminate(fx.instance_id)
    target = launch_instance("db1-new", fx.availability_zone, tag_array=False)
    name_in_config(emu, "db1", target)
    held = HeldStep(emu, "restore_attach", nth=2)
    arn = emu.start(
        "restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"}
    )
    held.wait()
    assert _array_tag(target) == "db1"
    boto3.client("stepfunctions").stop_execution(executionArn=arn, cause="operator stopped it")
    held.release()
    assert emu.wait(arn).status == "ABORTED"
    # WHEN the end of the run reaches the cleanup function
    done = emu.invoke("restore_abandoned", status_change(emu, arn, "ABORTED"))
    # THEN the instance no longer says it holds the array: nothing of it is there
    assert done.error_type is None, done.error_message
    assert done.result["untagged"] == target
    assert _array_tag(target) is None
    assert "/dev/md0" not in emu.hosts.state(target).arrays


def test_a_restore_stopped_once_it_assembled_keeps_the_tag(emu: Emulation) -> None:
    # GIVEN a restore onto a new instance, stopped once it entered its Assemble step
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    terminate(fx.instance_id)
    target = launch_instance("db1-new", fx.availability_zone, tag_array=False)
    name_in_config(emu, "db1", target)
    arn = stop_while_held(
        emu, "command_poll", {"array": "db1", "targetInstanceId": target, "initialization": "none"}
    )
    # WHEN the end of the run reaches the cleanup function
    done = emu.invoke("restore_abandoned", status_change(emu, arn, "ABORTED"))
    # THEN the tag stays: the array may be mounted there
    assert done.error_type is None, done.error_message
    assert "untagged" not in done.result or done.result["untagged"] is None
    assert _array_tag(target) == "db1"


@pytest.mark.parametrize("status", ["SUCCEEDED", "FAILED", "RUNNING"])
def test_runs_that_reached_their_own_end_are_not_touched(emu: Emulation, status: str) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    run = emu.run("restore", {"array": "db1", "mode": "replace"})
    mark = len(emu.double.calls)
    done = emu.invoke("restore_abandoned", status_change(emu, run.arn, status))
    assert done.result["cleaned"] is False
    assert [
        c for c in emu.double.calls[mark:] if c.applied and c.operation.startswith("Delete")
    ] == []
    assert json.loads(status_change(emu, run.arn, status)["detail"]["input"])["array"] == "db1"
