"""Automated recovery, as synthesized, on the emulation: EventBridge events delivered to the
recovery trigger as AWS delivers them, the recovery workflow, and the restore it runs nested."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import EXAMPLE_CONFIG, Emulation, Execution, synthesize
from raidsnap_emulation.world import (
    ArrayFixture,
    HeldStep,
    alarm_event,
    backed_up,
    configure_recovery,
    create_topics,
    instance_state_event,
    launch_event,
    launch_instance,
    make_array,
    restored_volumes,
    tags_of,
    terminate,
)


def executions(emu: Emulation, workflow: str) -> list[dict[str, Any]]:
    sfn = boto3.client("stepfunctions")
    return list(sfn.list_executions(stateMachineArn=emu.state_machines[workflow])["executions"])


def recover(emu: Emulation, event: dict[str, Any]) -> Execution:
    started = emu.invoke("recovery_start", event)
    assert started.error_type is None, started.error_message
    assert started.result["started"], started.result
    return emu.wait(started.result["executionArn"])


def instance_tags(instance_id: str) -> dict[str, str]:
    found = boto3.client("ec2").describe_instances(InstanceIds=[instance_id])["Reservations"]
    return tags_of(found[0]["Instances"][0])


def lifecycle_calls(emu: Emulation) -> list[dict[str, Any]]:
    """CompleteLifecycleAction calls (moto 5.2.5 does not implement it: recorded here)."""
    seen: list[dict[str, Any]] = []

    def complete(params: dict[str, Any]) -> dict[str, Any]:
        seen.append(dict(params))
        return {"ResponseMetadata": {"HTTPStatusCode": 200}}

    emu.double.route("autoscaling", "CompleteLifecycleAction", complete)
    return seen


@pytest.fixture
def db1(emu: Emulation) -> tuple[ArrayFixture, str]:
    fx = make_array(emu.hosts, "db1", 3)
    return fx, backed_up(emu.hosts, emu.run, fx)


def test_an_alarm_starts_one_recovery_that_replaces_the_array_in_place(
    emu: Emulation, db1: tuple[ArrayFixture, str]
) -> None:
    fx, set_id = db1
    # GIVEN the array's instance whose attached EBS fails its status check
    emu.hosts.lose_member(fx.instance_id, fx.member_ids[1])
    # WHEN the alarm's state change reaches the recovery trigger
    run = recover(emu, alarm_event(fx.instance_id))
    # THEN one recovery ran one restore, in replace mode on the same instance
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert len(executions(emu, "recovery")) == 1
    (restore,) = executions(emu, "restore")
    # (the recovery ends as the array is mounted; the restore finishes its last step after it)
    assert emu.wait(restore["executionArn"]).status == "SUCCEEDED"
    assert restore["name"] == run.arn.rsplit(":", 1)[1] + "-restore"
    out = run.output["restore"]
    assert (out["setId"], out["mode"], out["targetInstanceId"]) == (
        set_id,
        "replace",
        fx.instance_id,
    )
    # the array is assembled again on the instance, from the new volumes
    md = emu.hosts.state(fx.instance_id).arrays["/dev/md0"]
    assert (md.md_uuid, md.members, md.failed) == (out["newMdUuid"], out["volumeIds"], False)
    assert out["newMdUuid"] != fx.md_uuid
    assert [v["VolumeId"] for v in restored_volumes(restore["executionArn"])] == out["volumeIds"]
    # The recovery's output carries its own cost (its restore's is in the restore's output)
    cost = {line["item"]: line for line in run.output["cost"]["lines"]}
    assert cost["state transitions"]["quantity"] == str(run.transitions)
    # the old members are kept, detached and tagged with the restore that replaced them
    ec2 = boto3.client("ec2")
    old = ec2.describe_volumes(VolumeIds=fx.member_ids)["Volumes"]
    assert sorted(out["replacedVolumeIds"]) == sorted(fx.member_ids)
    for vol in old:
        assert vol["State"] == "available"
        assert tags_of(vol)["raidsnap:replaced-by"] == restore["executionArn"]
    assert run.output["trigger"] == "alarm"


def test_the_same_alarm_event_delivered_twice_starts_one_recovery(
    emu: Emulation, db1: tuple[ArrayFixture, str]
) -> None:
    fx, _ = db1
    emu.double.impair_volume(fx.member_ids[1])  # evidence: a member fails its status check
    event = alarm_event(fx.instance_id)
    first = emu.invoke("recovery_start", event).result
    again = emu.invoke("recovery_start", event).result  # while the first runs
    run = emu.wait(first["executionArn"])
    late_call = emu.invoke("recovery_start", event)  # after it ended
    assert late_call.error_type is None, late_call.error_message
    late = late_call.result
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert again.get("executionArn", first["executionArn"]) == first["executionArn"]
    assert (late["started"], late["reason"]) == (False, "duplicate")
    assert len(executions(emu, "recovery")) == 1
    assert len(executions(emu, "restore")) == 1


def test_a_second_alarm_while_the_first_restore_holds_the_lock_starts_no_restore(
    emu: Emulation, db1: tuple[ArrayFixture, str]
) -> None:
    fx, _ = db1
    # GIVEN the first recovery's restore held at its last step (it holds the restore lock)
    emu.double.impair_volume(fx.member_ids[1])  # evidence: a member fails its status check
    held = HeldStep(emu, "restore_finish")
    first = emu.invoke("recovery_start", alarm_event(fx.instance_id)).result
    held.wait()
    # WHEN a different alarm event arrives (the alarm fired again a minute later)
    second = emu.invoke("recovery_start", alarm_event(fx.instance_id, at="2026-11-21T06:01:00Z"))
    held.release()
    run = emu.wait(first["executionArn"])
    # THEN it started nothing, and said why
    assert second.error_type is None
    assert second.result["started"] is False
    assert "already running" in second.result["reason"]
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert len(executions(emu, "recovery")) == 1
    assert len(executions(emu, "restore")) == 1


def test_a_recovery_preempts_a_drill_of_the_same_array(
    emu: Emulation, db1: tuple[ArrayFixture, str]
) -> None:
    fx, _ = db1
    create_topics(emu)
    drill_host = launch_instance("db1-drill", fx.availability_zone, tag_array=False)
    boto3.client("ec2").create_tags(
        Resources=[drill_host], Tags=[{"Key": "raidsnap:array", "Value": "db1-drill"}]
    )
    # GIVEN a drill whose restore holds the array's restore lock
    held = HeldStep(emu, "restore_finish")
    drill = emu.start("drill", {"array": "db1", "targetInstanceId": drill_host})
    held.wait()
    # WHEN the array's instance fails
    emu.double.impair_volume(fx.member_ids[1])  # evidence: a member fails its status check
    started = emu.invoke("recovery_start", alarm_event(fx.instance_id))
    held.release()
    # THEN the drill's restore is stopped, the recovery restores the array in place...
    assert started.error_type is None, started.error_message
    assert started.result["started"] is True
    run = emu.wait(started.result["executionArn"])
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    drill_restore = next(e for e in executions(emu, "restore") if e["name"].startswith("drill-"))
    assert drill_restore["status"] == "ABORTED"
    assert (
        emu.hosts.state(fx.instance_id).arrays["/dev/md0"].members
        == run.output["restore"]["volumeIds"]
    )
    # ...and the drill fails, after removing every volume its restore created
    drilled = emu.wait(drill)
    # (AWS names the stop's error, PreemptedByRecovery; moto 5.2.5 keeps no error for a stop)
    assert drilled.status == "FAILED"
    assert drilled.error in ("PreemptedByRecovery", "RestoreAborted")
    left = [
        v["VolumeId"]
        for v in restored_volumes(drill_restore["executionArn"])
        if v["State"] not in ("deleting", "deleted")
    ]
    assert left == []


# Only a config that names an Auto Scaling group grants CompleteLifecycleAction on it: these run
# on the stack synthesized with the example config, whose array analytics names its group.
@pytest.fixture
def analytics(example_emu: Emulation) -> tuple[ArrayFixture, str]:
    fx = make_array(example_emu.hosts, "analytics", 3)
    return fx, backed_up(example_emu.hosts, example_emu.run, fx)


@pytest.fixture
def example_emu(example_template: Path) -> Iterator[Emulation]:
    with Emulation(example_template) as emulation:
        yield emulation


@pytest.fixture(scope="module")
def example_template() -> Path:
    return synthesize(config=EXAMPLE_CONFIG)


def test_a_launch_into_the_group_restores_onto_the_new_instance_and_continues(
    example_emu: Emulation, analytics: tuple[ArrayFixture, str]
) -> None:
    emu = example_emu
    fx, set_id = analytics
    completed = lifecycle_calls(emu)
    configure_recovery(emu, "analytics", instanceId=fx.instance_id, autoScalingGroup="analytics")
    # GIVEN the group replaced the lost instance with a new one, held in Pending:Wait
    terminate(fx.instance_id)
    new = launch_instance(
        "analytics-asg", fx.availability_zone, tag_array=False, auto_scaling_group="analytics"
    )
    # WHEN its launch lifecycle action reaches the recovery trigger
    token = "4c5d6e7f-1111-2222-3333-444455556666"  # noqa: S105 - a lifecycle action id
    run = recover(emu, launch_event("analytics", new, token=token, hook="raidsnap-analytics"))
    # THEN the array is restored onto the new instance, and the launch continues
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    out = run.output["restore"]
    assert (out["setId"], out["mode"], out["targetInstanceId"]) == (set_id, "attach", new)
    md = emu.hosts.state(new).arrays["/dev/md0"]
    assert (md.md_uuid, md.members) == (out["newMdUuid"], out["volumeIds"])
    assert run.output["lifecycleAction"] == "CONTINUE"
    assert completed == [
        {
            "LifecycleHookName": "raidsnap-analytics",
            "AutoScalingGroupName": "analytics",
            "LifecycleActionToken": "4c5d6e7f-1111-2222-3333-444455556666",
            "LifecycleActionResult": "CONTINUE",
        }
    ]


def test_a_launch_whose_restore_fails_is_abandoned_with_the_restore_error(
    example_emu: Emulation, analytics: tuple[ArrayFixture, str]
) -> None:
    emu = example_emu
    fx, _ = analytics
    completed = lifecycle_calls(emu)
    configure_recovery(emu, "analytics", instanceId=fx.instance_id, autoScalingGroup="analytics")
    terminate(fx.instance_id)
    new = launch_instance(
        "analytics-asg", fx.availability_zone, tag_array=False, auto_scaling_group="analytics"
    )
    emu.hosts.fail_next(
        "assemble",
        CommandOutcome(
            status="Failed",
            stdout=json.dumps(
                {"ok": False, "error": "AssembleFailed", "message": "not enough to start"}
            ),
            stderr="mdadm: /dev/md0 assembled from 2 drives - not enough to start the array.",
            exit_code=1,
            duration_seconds=3,
        ),
    )
    run = recover(emu, launch_event("analytics", new, hook="raidsnap-analytics"))
    assert run.status == "FAILED"
    assert run.error == "CommandFailed"
    assert "not enough to start the array" in str(run.cause)
    assert "ABANDON" in str(run.cause)
    assert [c["LifecycleActionResult"] for c in completed] == ["ABANDON"]
    (restore,) = executions(emu, "restore")
    assert restore["status"] == "FAILED"
    # the failed restore removed what it created
    assert all(
        v["State"] in ("deleting", "deleted") for v in restored_volumes(restore["executionArn"])
    )


def test_a_recovery_without_a_complete_set_fails_with_the_restore_error(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    run = recover(emu, alarm_event(fx.instance_id))
    assert (run.status, run.error) == ("FAILED", "SnapshotSetNotFound")
    assert "no complete snapshot set" in str(run.cause)
    md = emu.hosts.state(fx.instance_id).arrays["/dev/md0"]
    assert md.members == fx.member_ids  # nothing was touched


def test_a_terminated_instance_is_restored_onto_the_configured_replacement(
    emu: Emulation, db1: tuple[ArrayFixture, str]
) -> None:
    fx, set_id = db1
    standby = launch_instance("db1-standby", fx.availability_zone, tag_array=False)
    configure_recovery(emu, "db1", instanceId=fx.instance_id, replacementInstanceId=standby)
    terminate(fx.instance_id)
    run = recover(emu, instance_state_event(fx.instance_id, "terminated"))
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    out = run.output["restore"]
    assert (out["setId"], out["mode"], out["targetInstanceId"]) == (set_id, "attach", standby)
    assert emu.hosts.state(standby).arrays["/dev/md0"].members == out["volumeIds"]
    ec2 = boto3.client("ec2")
    tagged = ec2.describe_instances(InstanceIds=[standby])["Reservations"][0]["Instances"][0]
    assert tags_of(tagged)["raidsnap:array"] == "db1"  # backups follow the array there


def test_an_alarm_in_attach_mode_moves_the_array_to_the_replacement(
    emu: Emulation, db1: tuple[ArrayFixture, str]
) -> None:
    fx, set_id = db1
    standby = launch_instance("db1-standby", fx.availability_zone, tag_array=False)
    configure_recovery(
        emu, "db1", instanceId=fx.instance_id, mode="attach", replacementInstanceId=standby
    )
    emu.double.impair_volume(fx.member_ids[1])  # evidence: a member fails its status check
    run = recover(emu, alarm_event(fx.instance_id))
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    out = run.output["restore"]
    assert (out["setId"], out["mode"], out["targetInstanceId"]) == (set_id, "attach", standby)
    assert emu.hosts.state(standby).arrays["/dev/md0"].members == out["volumeIds"]
    # the array's tag moved: backups now follow the replacement, the failed instance is left be
    assert instance_tags(standby)["raidsnap:array"] == "db1"
    assert "raidsnap:array" not in instance_tags(fx.instance_id)
    assert emu.hosts.state(fx.instance_id).arrays["/dev/md0"].members == fx.member_ids


def test_a_failed_attach_mode_recovery_gives_the_array_back_to_its_instance(
    emu: Emulation, db1: tuple[ArrayFixture, str]
) -> None:
    fx, _ = db1
    standby = launch_instance("db1-standby", fx.availability_zone, tag_array=False)
    configure_recovery(
        emu, "db1", instanceId=fx.instance_id, mode="attach", replacementInstanceId=standby
    )
    emu.hosts.fail_next(
        "assemble", CommandOutcome(status="Failed", stderr="mdadm: boom", exit_code=1)
    )
    emu.double.impair_volume(fx.member_ids[1])  # evidence: a member fails its status check
    run = recover(emu, alarm_event(fx.instance_id))
    assert (run.status, run.error) == ("FAILED", "CommandFailed")
    assert f"{fx.instance_id} is tagged raidsnap:array=db1 again" in str(run.cause)
    assert instance_tags(fx.instance_id)["raidsnap:array"] == "db1"
    assert "raidsnap:array" not in instance_tags(standby)


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(lambda fx: alarm_event(fx.instance_id, state="OK"), id="alarm-back-to-ok"),
        pytest.param(lambda fx: alarm_event("i-0123456789abcdef0"), id="alarm-of-another-instance"),
        pytest.param(lambda fx: instance_state_event(fx.instance_id, "stopped"), id="stopped"),
        pytest.param(
            lambda fx: instance_state_event(fx.instance_id, "terminated"), id="lost-no-replacement"
        ),
        pytest.param(lambda fx: launch_event("other-asg", "i-0123456789abcdef0"), id="other-group"),
        pytest.param(lambda fx: {"source": "aws.s3", "detail-type": "Object Created"}, id="other"),
    ],
)
def test_events_that_ask_for_no_recovery_start_nothing(
    emu: Emulation, event: Any, db1: tuple[ArrayFixture, str]
) -> None:
    fx, _ = db1
    configure_recovery(emu, "db1", instanceId=fx.instance_id)
    answer = emu.invoke("recovery_start", event(fx))
    assert answer.error_type is None
    assert answer.result["started"] is False
    assert executions(emu, "recovery") == []


def test_an_array_whose_name_has_a_dot_is_recovered(emu: Emulation) -> None:
    # GIVEN an array named as ArrayName allows (letters, digits, "_", "." and "-"), backed up,
    # whose instance is terminated with a replacement configured
    fx = make_array(emu.hosts, "db.1", 3)
    set_id = backed_up(emu.hosts, emu.run, fx)
    standby = launch_instance("db.1-standby", fx.availability_zone, tag_array=False)
    configure_recovery(emu, "db.1", instanceId=fx.instance_id, replacementInstanceId=standby)
    terminate(fx.instance_id)
    # WHEN the termination reaches the recovery trigger
    run = recover(emu, instance_state_event(fx.instance_id, "terminated"))
    # THEN the recovery and its restore start (the state machines log, so their execution
    # names may hold only letters, digits, "-" and "_") and the array is back
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["restore"]["setId"] == set_id
    assert emu.hosts.state(standby).arrays["/dev/md0"].members == run.output["restore"]["volumeIds"]


def test_a_second_delivery_while_the_recovery_runs_is_answered_as_a_duplicate(
    emu: Emulation, db1: tuple[ArrayFixture, str]
) -> None:
    """StartExecution with the name and input of a running execution succeeds and returns that
    execution (StartExecution, Step Functions API Reference): the second delivery of an event
    must not report a second recovery started."""
    fx, _ = db1
    emu.double.impair_volume(fx.member_ids[1])
    event = alarm_event(fx.instance_id)
    held = HeldStep(emu, "recovery_step")
    first = emu.invoke("recovery_start", event).result
    held.wait()
    again = emu.invoke("recovery_start", event).result  # while the first runs
    held.release()
    assert emu.wait(first["executionArn"]).status == "SUCCEEDED"
    assert (again["started"], again["reason"]) == (False, "duplicate"), again
    assert again["executionArn"] == first["executionArn"]


def test_a_launch_before_the_old_instance_ends_restores_and_backups_follow_once_it_ends(
    example_emu: Emulation, analytics: tuple[ArrayFixture, str]
) -> None:
    # GIVEN a group that launches the replacement before it terminates the impaired instance
    # (an instance maintenance policy that launches first): both run for a while
    emu = example_emu
    fx, _ = analytics
    completed = lifecycle_calls(emu)
    configure_recovery(emu, "analytics", instanceId=fx.instance_id, autoScalingGroup="analytics")
    new = launch_instance(
        "analytics-asg", fx.availability_zone, tag_array=False, auto_scaling_group="analytics"
    )
    # WHEN its launch reaches the recovery trigger while the old instance still carries the tag
    run = recover(emu, launch_event("analytics", new, hook="raidsnap-analytics"))
    # THEN the array is restored onto the launch and the lifecycle action continues
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert [c["LifecycleActionResult"] for c in completed] == ["CONTINUE"]
    restored = run.output["restore"]["volumeIds"]
    # AND once the group terminated the old instance (and the restore, which holds the array's
    # restore lock to its last step, has ended), backups take the restored array
    assert emu.wait(run.output["restoreExecutionArn"]).status == "SUCCEEDED"
    terminate(fx.instance_id)
    emu.clock.advance(3600)
    backup = emu.run("backup", {"array": "analytics"})
    assert backup.status == "SUCCEEDED", f"{backup.error}: {backup.cause}"
    assert backup.output["memberVolumeIds"] == restored
