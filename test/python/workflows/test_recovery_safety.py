"""A recovery replaces an array only on evidence that a member is impaired, one at a time, says
which set it restores and what is lost, never skips in silence, and keeps a launching instance's
lifecycle action alive until the array is assembled.

StatusCheckFailed_AttachedEBS covers every attached EBS volume of the instance (the boot volume
and scratch volumes too) and names none: its ALARM is a reason to look, not to roll the array
back to its newest set."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

from raidsnap_emulation.harness import EXAMPLE_CONFIG, Emulation, synthesize
from raidsnap_emulation.world import (
    SLOW_EBS_INSTANCE_TYPE,
    ArrayFixture,
    HeldStep,
    alarm_event,
    backed_up,
    configure_recovery,
    create_topics,
    launch_event,
    launch_instance,
    make_array,
    terminate,
)


def executions(emu: Emulation, workflow: str) -> list[dict[str, Any]]:
    sfn = boto3.client("stepfunctions")
    return list(sfn.list_executions(stateMachineArn=emu.state_machines[workflow])["executions"])


def notifications(emu: Emulation) -> list[str]:
    return [
        str(c.params["Message"])
        for c in emu.double.calls
        if (c.service, c.operation) == ("sns", "Publish") and c.applied
    ]


@pytest.fixture
def db1(emu: Emulation) -> tuple[ArrayFixture, str]:
    create_topics(emu)
    fx = make_array(emu.hosts, "db1", 3, unrelated=1)
    return fx, backed_up(emu.hosts, emu.run, fx)


def test_an_alarm_without_an_impaired_member_replaces_nothing_and_says_so(
    emu: Emulation, db1: tuple[ArrayFixture, str]
) -> None:
    # GIVEN the instance's scratch volume (not a member) fails its status check: the attached
    # EBS alarm fires, for the instance as a whole
    fx, set_id = db1
    emu.double.impair_volume(fx.other_volume_ids[0])
    # WHEN the alarm reaches the recovery trigger
    started = emu.invoke("recovery_start", alarm_event(fx.instance_id))
    run = emu.wait(started.result["executionArn"])
    # THEN no restore ran: the healthy array is exactly as it was
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert executions(emu, "restore") == []
    assert run.output["action"] == "none"
    md = emu.hosts.state(fx.instance_id).arrays["/dev/md0"]
    assert (md.members, md.failed) == (fx.member_ids, False)
    # AND the operators were told why, and which set a restore would have used, how old it is
    (message,) = [m for m in notifications(emu) if "db1" in m and "alarm" in m]
    assert "no member of db1 is impaired" in message, message
    assert set_id in message and "old" in message and "not in it" in message, message


def test_an_alarm_with_an_impaired_member_replaces_the_array_and_names_the_set_and_its_age(
    emu: Emulation, db1: tuple[ArrayFixture, str]
) -> None:
    fx, set_id = db1
    emu.clock.advance(6 * 3600)  # the newest set is six hours old when the member fails
    emu.double.impair_volume(fx.member_ids[1])
    now = emu.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
    started = emu.invoke("recovery_start", alarm_event(fx.instance_id, at=now))
    run = emu.wait(started.result["executionArn"])
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    (restore,) = executions(emu, "restore")
    # (the recovery ends as the array is mounted; the restore finishes its last step after it)
    assert emu.wait(restore["executionArn"]).status == "SUCCEEDED"
    out = run.output
    assert out["action"] == "restored"
    assert fx.member_ids[1] in " ".join(out["evidence"])
    assert (out["set"]["setId"], round(out["set"]["ageMinutes"] / 60)) == (set_id, 6)
    assert "writes made after" in out["message"] and "are not in it" in out["message"]
    (started_note,) = [m for m in notifications(emu) if "restoring" in m]
    assert set_id in started_note and "6 h" in started_note, started_note
    assert "are not in it" in started_note


def test_a_flapping_alarm_starts_one_recovery(
    emu: Emulation, db1: tuple[ArrayFixture, str]
) -> None:
    fx, _ = db1
    emu.double.impair_volume(fx.member_ids[0])
    # GIVEN a recovery started by the first ALARM, still before its restore takes the lock
    held = HeldStep(emu, "recovery_step")
    first = emu.invoke("recovery_start", alarm_event(fx.instance_id)).result
    held.wait()
    # WHEN the alarm flaps: OK, then ALARM again a minute later
    second = emu.invoke("recovery_start", alarm_event(fx.instance_id, at="2026-11-21T06:01:00Z"))
    held.release()
    run = emu.wait(first["executionArn"])
    # THEN the second transition started nothing, and said so
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert second.error_type is None, second.error_message
    assert second.result["started"] is False
    assert "already recovering" in second.result["reason"]
    assert len(executions(emu, "recovery")) == 1
    assert len(executions(emu, "restore")) == 1
    assert any("already recovering" in m for m in notifications(emu))
    # AND an ALARM after the recovery (and its restore, which holds the array's restore lock to
    # its end) finds the new members healthy and replaces nothing
    (restore,) = executions(emu, "restore")
    assert emu.wait(restore["executionArn"]).status == "SUCCEEDED"
    third = emu.invoke("recovery_start", alarm_event(fx.instance_id, at="2026-11-21T07:00:00Z"))
    again = emu.wait(third.result["executionArn"])
    assert (again.status, again.output["action"]) == ("SUCCEEDED", "none")
    assert len(executions(emu, "restore")) == 1


def test_a_recovery_skipped_because_a_restore_holds_the_lock_notifies(
    emu: Emulation, db1: tuple[ArrayFixture, str]
) -> None:
    fx, _ = db1
    # GIVEN a restore of db1 started by hand, holding its lock
    held = HeldStep(emu, "restore_finish")
    by_hand = emu.start(
        "restore", {"array": "db1", "mode": "replace", "initialization": "none"}, name="by-hand"
    )
    held.wait()
    # WHEN the alarm fires meanwhile
    emu.double.impair_volume(fx.member_ids[0])
    skipped = emu.invoke("recovery_start", alarm_event(fx.instance_id))
    held.release()
    assert emu.wait(by_hand).status == "SUCCEEDED"
    # THEN no recovery started, and the operators were told, with the restore that holds it
    assert skipped.result["started"] is False
    (message,) = [m for m in notifications(emu) if "no recovery" in m]
    assert by_hand in message and "db1" in message, message


# The lifecycle hook exists only with a config that names an Auto Scaling group.
@pytest.fixture(scope="module")
def example_template() -> Path:
    return synthesize(config=EXAMPLE_CONFIG)


@pytest.fixture
def example_emu(example_template: Path) -> Iterator[Emulation]:
    with Emulation(example_template) as emulation:
        yield emulation


def test_a_launch_hook_is_kept_alive_through_a_long_prewarm_and_completed_once_assembled(
    example_emu: Emulation,
) -> None:
    emu = example_emu
    create_topics(emu)
    # GIVEN analytics on 3 x 1 TiB members, and a prewarm that reads them at 200 MiB/s (about
    # 87 minutes), longer than the hook's one-hour heartbeat timeout
    fx = make_array(emu.hosts, "analytics", 3, size_gib=1024, unrelated=0)
    backed_up(emu.hosts, emu.run, fx)
    emu.hosts.prewarm_mib_per_second = 200.0
    configure_recovery(
        emu,
        "analytics",
        instanceId=fx.instance_id,
        autoScalingGroup="analytics",
        initialization="prewarm",
    )
    terminate(fx.instance_id)
    new = launch_instance(
        "analytics-asg", fx.availability_zone, tag_array=False, auto_scaling_group="analytics"
    )
    token = "4c5d6e7f-1111-2222-3333-444455556666"  # noqa: S105 - a lifecycle action id
    emu.double.lifecycle_action("analytics", "raidsnap-analytics", token, new)
    # WHEN the launch reaches the recovery trigger
    started = emu.invoke(
        "recovery_start", launch_event("analytics", new, token=token, hook="raidsnap-analytics")
    )
    run = emu.wait(started.result["executionArn"])
    # THEN the launch continued: the hook was completed with CONTINUE once the array was
    # assembled, kept alive by heartbeats until then, and the restore ran its whole prewarm
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["restore"]["prewarm"]["status"] == "running"
    restore = emu.wait(run.output["restoreExecutionArn"])
    assert restore.output["prewarm"]["status"] == "success"
    result, _heartbeats = emu.double.lifecycle_result(token)
    assert result == "CONTINUE"
    (complete,) = [
        c for c in emu.double.calls if c.operation == "CompleteLifecycleAction" and c.applied
    ]
    (prewarm,) = [
        c
        for c in emu.double.calls
        if c.operation == "SendCommand" and str(c.params["DocumentName"]).endswith("-prewarm")
    ]
    assert complete.time <= prewarm.time + timedelta(seconds=600)
    assert run.output["lifecycleAction"] == "CONTINUE"


def test_a_launch_hook_is_kept_alive_by_heartbeats_while_fsr_optimizes_for_over_an_hour(
    example_emu: Emulation,
) -> None:
    emu = example_emu
    create_topics(emu)
    # GIVEN analytics on 3 x 1 TiB members, recovered with FSR: optimizing takes about an hour
    # per TiB before the volumes can be created, longer than the hook's heartbeat timeout
    fx = make_array(
        emu.hosts, "analytics", 3, size_gib=1024, unrelated=0, instance_type=SLOW_EBS_INSTANCE_TYPE
    )
    backed_up(emu.hosts, emu.run, fx)
    configure_recovery(
        emu,
        "analytics",
        instanceId=fx.instance_id,
        autoScalingGroup="analytics",
        initialization="fsr",
    )
    terminate(fx.instance_id)
    new = launch_instance(
        "analytics-asg",
        fx.availability_zone,
        tag_array=False,
        auto_scaling_group="analytics",
        instance_type=SLOW_EBS_INSTANCE_TYPE,
    )
    token = "5d6e7f80-1111-2222-3333-444455556666"  # noqa: S105 - a lifecycle action id
    emu.double.lifecycle_action("analytics", "raidsnap-analytics", token, new)
    started = emu.invoke(
        "recovery_start", launch_event("analytics", new, token=token, hook="raidsnap-analytics")
    )
    run = emu.wait(started.result["executionArn"])
    # THEN the instance was never abandoned: heartbeats kept the action open past the hour, and
    # it was completed with CONTINUE
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    result, heartbeats = emu.double.lifecycle_result(token)
    assert result == "CONTINUE"
    assert heartbeats, "no heartbeat was recorded"
    (complete,) = [
        c for c in emu.double.calls if c.operation == "CompleteLifecycleAction" and c.applied
    ]
    launched = min(
        c.time for c in emu.double.calls if c.operation == "RecordLifecycleActionHeartbeat"
    )
    assert (complete.time - launched).total_seconds() > 3600
