"""Failure paths around a recovery that moves an array: what follows it, what must not be
undone once it is mounted on its new instance, and what a healthy array there must not suffer
(README "Automated recovery and drills").

Runs on the stack synthesized with the example config, where db1 has an alarm and a replacement.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from raidsnap_emulation.double import AwsError, CommandOutcome
from raidsnap_emulation.harness import EXAMPLE_CONFIG, Emulation, Execution, synthesize
from raidsnap_emulation.world import (
    HeldStep,
    attach_recovery_onto_standby,
    backed_up,
    configure_recovery,
    create_topics,
    instance_tags,
    launch_event,
    launch_instance,
    make_array,
    recovery_started_by_alarm,
    terminate,
)


@pytest.fixture(scope="module")
def example() -> Path:
    return synthesize(config=EXAMPLE_CONFIG)


@pytest.fixture
def emu(example: Path) -> Iterator[Emulation]:
    with Emulation(example) as emulation:
        create_topics(emulation)
        yield emulation


def _moved(emu: Emulation) -> tuple[Any, str, str, Execution]:
    fx, standby, alarm = attach_recovery_onto_standby(emu, "db1")
    emu.double.impair_volume(fx.member_ids[1])  # evidence: a member fails its status check
    run = emu.wait(recovery_started_by_alarm(emu, alarm))
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["restore"]["targetInstanceId"] == standby
    # The recovery ends as the array is mounted; its restore holds the array's restore lock
    # until its own last step.
    assert emu.wait(run.output["restoreExecutionArn"]).status == "SUCCEEDED"
    return fx, standby, alarm, run


def test_after_a_move_an_alarm_with_no_impaired_member_replaces_nothing(emu: Emulation) -> None:
    """The attached-EBS alarm covers the boot and scratch volumes too. After a move, before the
    next backup, the newest set's members are still attached to the instance the array left:
    that must not count as evidence against the healthy array on its new instance."""
    _, standby, alarm, _ = _moved(emu)
    emu.clock.advance(3600)
    live = list(emu.hosts.state(standby).arrays["/dev/md0"].members)
    # WHEN the alarm of the new instance fires with every member of its array healthy
    run = emu.wait(recovery_started_by_alarm(emu, alarm))
    # THEN nothing is replaced: the array the user writes to stays mounted on its volumes
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["action"] == "none", run.output.get("evidence") or run.output
    assert emu.hosts.state(standby).arrays["/dev/md0"].members == live


def test_a_failure_after_the_array_moved_does_not_give_its_tag_back(emu: Emulation) -> None:
    """The restore succeeded and the array is mounted on the replacement; the last step's
    notification fails (an SNS error that is not throttling). The tag must stay with the
    array: two running instances tagged with it stop every backup of it."""
    fx, standby, alarm = attach_recovery_onto_standby(emu, "db1")

    def publish(params: dict[str, Any]) -> dict[str, Any]:
        if "recovered onto" in str(params.get("Subject")):
            raise AwsError("KMSThrottling", "the topic's key is throttled")  # not retried
        return {"MessageId": "m-1", "ResponseMetadata": {"HTTPStatusCode": 200}}

    emu.double.route("sns", "Publish", publish)
    emu.double.impair_volume(fx.member_ids[1])
    run = emu.wait(recovery_started_by_alarm(emu, alarm))
    assert "/dev/md0" in emu.hosts.state(standby).arrays  # restored and mounted there
    assert instance_tags(standby).get("raidsnap:array") == "db1"
    # the failed instance must not hold the array's tag again
    assert instance_tags(fx.instance_id).get("raidsnap:array") != "db1", (
        f"{run.status} {run.error}: {run.cause}"
    )
    # and backups of the array go on, from where it lives now (once the restore, which holds
    # the array's restore lock to its last step, has ended)
    assert emu.wait(run.output["restoreExecutionArn"]).status == "SUCCEEDED"
    emu.clock.advance(3600)
    backup = emu.run("backup", {"array": "db1"})
    assert backup.status == "SUCCEEDED", f"{backup.error}: {backup.cause}"


def test_a_restore_stopped_after_assembly_does_not_tag_both_instances(emu: Emulation) -> None:
    """The restore assembled and mounted the array on the replacement (the user's from then
    on), could not report it, and is stopped before its last step (an operator stops a long
    prewarm). When the stop reaches the recovery, it finds what the restore wrote back before
    its report was refused (the array mounted there) and ends with it, saying the restore was
    stopped; it must not tag the failed instance again while the replacement carries the
    tag."""
    fx, standby, alarm = attach_recovery_onto_standby(emu, "db1")
    emu.double.impair_volume(fx.member_ids[1])
    # The report fails (a server error that outlasts the SDK's retries): the restore goes on
    # without having told the recovery
    emu.double.fail("stepfunctions", "SendTaskSuccess", code="InternalError")
    held = HeldStep(emu, "restore_finish")
    arn = recovery_started_by_alarm(emu, alarm)
    held.wait()
    sfn = boto3.client("stepfunctions")
    restore = next(
        e["executionArn"]
        for e in sfn.list_executions(stateMachineArn=emu.state_machines["restore"])["executions"]
        if e["status"] == "RUNNING"
    )
    assert "/dev/md0" in emu.hosts.state(standby).arrays  # assembled and mounted
    sfn.stop_execution(executionArn=restore, cause="operator stopped the prewarm")
    held.release()
    assert emu.wait(restore).status == "ABORTED"
    emu.services.execution_event(restore)  # Step Functions reports the stop to the rules
    run = emu.wait(arn)
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["restore"]["targetInstanceId"] == standby
    assert "then ended ABORTED" in run.output["message"], run.output["message"]
    tagged = [
        i for i in (fx.instance_id, standby) if instance_tags(i).get("raidsnap:array") == "db1"
    ]
    assert tagged == [standby], f"{run.status} {run.error}: {run.cause}"


def test_an_alarm_that_could_not_follow_names_the_instance_it_still_watches(
    emu: Emulation,
) -> None:
    """PutMetricAlarm is denied (a service control policy, say) after DescribeAlarms read the
    alarm: the output and the notification must say which instance the alarm still watches,
    not "its instance" (the array's instance is the replacement now)."""
    fx, _, alarm = attach_recovery_onto_standby(emu, "db1")
    emu.double.fail("cloudwatch", "PutMetricAlarm", times=20, code="AccessDenied")
    emu.double.impair_volume(fx.member_ids[1])
    run = emu.wait(recovery_started_by_alarm(emu, alarm))
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    protection = run.output["protection"]
    assert protection["problem"] and "AccessDenied" in protection["problem"]
    assert protection["previousInstanceId"] == fx.instance_id, protection
    assert f"still watches {fx.instance_id}" in run.output["message"], run.output["message"]


def test_a_launch_whose_continue_fails_once_is_not_abandoned_with_the_array_mounted(
    emu: Emulation,
) -> None:
    """The array is restored and mounted on the instance launched into its group; completing
    the lifecycle action with CONTINUE fails once (ResourceContention, HTTP 500). The recovery
    must not answer ABANDON: the group would terminate the instance that holds the array, and
    the alarm would stay on the instance the array left."""
    fx = make_array(emu.hosts, "analytics", 2)
    backed_up(emu.hosts, emu.run, fx)
    configure_recovery(emu, "analytics", instanceId=fx.instance_id, autoScalingGroup="analytics")
    completed: list[str] = []

    def complete(params: dict[str, Any]) -> dict[str, Any]:
        completed.append(str(params["LifecycleActionResult"]))
        if len(completed) == 1:
            raise AwsError("ResourceContention", "a pending update to the group", 500)
        return {"ResponseMetadata": {"HTTPStatusCode": 200}}

    emu.double.route("autoscaling", "CompleteLifecycleAction", complete)
    terminate(fx.instance_id)
    new = launch_instance(
        "analytics-asg", fx.availability_zone, tag_array=False, auto_scaling_group="analytics"
    )
    started = emu.invoke(
        "recovery_start", launch_event("analytics", new, hook="raidsnap-analytics")
    )
    assert started.error_type is None and started.result["started"], started.result
    run = emu.wait(started.result["executionArn"])
    assert "/dev/md0" in emu.hosts.state(new).arrays  # restored and mounted on the new instance
    assert "ABANDON" not in completed, f"{completed}: {run.status} {run.error}: {run.cause}"


def test_a_retried_target_step_still_gives_the_tag_back_when_the_restore_fails(
    emu: Emulation,
) -> None:
    """The target step takes the array's tag off the failed instance; EC2 applied DeleteTags but
    the answer was throttling, so the step is retried. The restore then fails (the array cannot
    be assembled on the replacement). The array is still on the failed instance only: it must
    carry the tag again, or no instance carries it and every backup of the array stops."""
    fx, standby, alarm = attach_recovery_onto_standby(emu, "db1")
    emu.double.fail("ec2", "DeleteTags", code="RequestLimitExceeded", after_success=True)
    emu.hosts.fail_next(
        "assemble",
        CommandOutcome(
            status="Failed",
            stdout='{"ok": false, "error": "AssembleFailed", "message": "not enough to start"}',
            stderr="mdadm: /dev/md0 assembled from 1 drive - not enough to start the array.",
            exit_code=1,
            duration_seconds=3,
        ),
    )
    emu.double.impair_volume(fx.member_ids[1])
    run = emu.wait(recovery_started_by_alarm(emu, alarm))
    assert run.status == "FAILED", run.output
    assert "/dev/md0" not in emu.hosts.state(standby).arrays
    tagged = [
        i for i in (fx.instance_id, standby) if instance_tags(i).get("raidsnap:array") == "db1"
    ]
    assert tagged == [fx.instance_id], f"{run.error}: {run.cause}"


def _boot_volume(instance_id: str) -> str:
    found = boto3.client("ec2").describe_instances(InstanceIds=[instance_id])["Reservations"]
    instance = found[0]["Instances"][0]
    root = instance.get("RootDeviceName")
    return next(
        m["Ebs"]["VolumeId"]
        for m in instance["BlockDeviceMappings"]
        if m["DeviceName"] == root or len(instance["BlockDeviceMappings"]) == 1
    )


def test_after_a_move_and_the_old_instance_terminated_a_boot_volume_alarm_replaces_nothing(
    emu: Emulation,
) -> None:
    """The old instance is terminated after the move; its data volumes survive it (volumes
    attached after launch have DeleteOnTermination false: EC2 User Guide, "Preserve data when an
    instance is terminated") and become available, still the newest set's source volumes. They
    are volumes the array has left, not evidence about the array as it is now."""
    fx, standby, alarm, _ = _moved(emu)
    terminate(fx.instance_id)
    emu.clock.advance(3600)
    ec2 = boto3.client("ec2")
    left = ec2.describe_volumes(VolumeIds=fx.member_ids)["Volumes"]
    assert {v["State"] for v in left} == {"available"}  # the emulation keeps them, as EC2 does
    live = list(emu.hosts.state(standby).arrays["/dev/md0"].members)
    # WHEN only the standby's boot volume fails its status check and its alarm fires
    emu.double.impair_volume(_boot_volume(standby))
    run = emu.wait(recovery_started_by_alarm(emu, alarm))
    # THEN nothing is replaced: the array keeps its volumes on the standby
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["action"] == "none", run.output.get("evidence") or run.output
    assert emu.hosts.state(standby).arrays["/dev/md0"].members == live
    # AND a member of the live array that fails its status check is still evidence
    emu.double.impair_volume(live[0])
    emu.clock.advance(3600)
    again = emu.wait(recovery_started_by_alarm(emu, alarm))
    assert again.status == "SUCCEEDED", f"{again.error}: {again.cause}"
    assert again.output["action"] != "none", again.output


def test_after_a_move_a_member_of_the_restored_array_that_left_the_instance_is_evidence(
    emu: Emulation,
) -> None:
    # GIVEN db1 moved onto the standby and its old instance terminated
    fx, standby, alarm, _ = _moved(emu)
    terminate(fx.instance_id)
    emu.clock.advance(3600)
    # WHEN one of the standby's restored members is detached (EC2 took it away) and the alarm
    # fires
    live = list(emu.hosts.state(standby).arrays["/dev/md0"].members)
    emu.hosts.lose_member(standby, live[1])
    boto3.client("ec2").detach_volume(VolumeId=live[1], InstanceId=standby, Force=True)
    emu.clock.advance(emu.double.detach_seconds + 1)
    run = emu.wait(recovery_started_by_alarm(emu, alarm))
    # THEN that is evidence about the array as it is now, and the array is recovered
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert any(live[1] in e for e in run.output.get("evidence") or []), run.output
    assert run.output["action"] != "none", run.output
