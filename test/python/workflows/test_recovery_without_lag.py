"""A recovery hears of its restore's milestones when they happen, not at its next look: the
restore tells the recovery that waits on it the moment its array is assembled and mounted (the
array is usable from then on, while a prewarm may read for hours), and tells it of its failure;
a restore that ends without telling (stopped, timed out) reaches it through the restore's end
event. A launch's lifecycle action is completed with CONTINUE as the array is mounted, and kept
alive by heartbeats until then."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from faults import crash

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import EXAMPLE_CONFIG, Emulation, synthesize
from raidsnap_emulation.world import (
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

# What "at once" means on the emulation's clock: a step or two, never a look's wait.
PROMPT_SECONDS = 30


def started(emu: Emulation, event: dict[str, Any]) -> str:
    answer = emu.invoke("recovery_start", event)
    assert answer.error_type is None, answer.error_message
    assert answer.result["started"], answer.result
    return str(answer.result["executionArn"])


def restore_of(emu: Emulation, timeout: float = 60.0) -> str:
    """The one restore the recovery started (once it has)."""
    sfn = boto3.client("stepfunctions")
    deadline = time.monotonic() + timeout
    while True:
        found = sfn.list_executions(stateMachineArn=emu.state_machines["restore"])["executions"]
        if found or time.monotonic() > deadline:
            (restore,) = found
            return str(restore["executionArn"])
        time.sleep(0.01)


def polled(emu: Emulation, kind: str, status: str) -> datetime:
    """When the restore saw its ``kind`` document (assemble, prewarm) end with ``status``."""
    assert emu.router is not None
    seen = [
        i.at
        for i in emu.router.invocations
        if i.module == "command_poll"
        and str(i.event["command"]["document"]).endswith(f"-{kind}")
        and isinstance(i.result, dict)
        and i.result.get("status") == status
    ]
    assert seen, f"the restore never saw its {kind} end with {status}"
    return seen[0]


def last_step(emu: Emulation) -> datetime:
    """When the recovery's last step ran (its run ends with it)."""
    assert emu.router is not None
    return max(i.at for i in emu.router.invocations if i.module == "recovery_step")


def seconds(later: datetime, earlier: datetime) -> float:
    return (later - earlier).total_seconds()


@pytest.fixture
def slow_prewarm(emu: Emulation) -> str:
    """db1 on 3 x 1 TiB members, backed up, whose recoveries restore it with a prewarm at
    200 MiB/s (87 minutes), and one of whose members is lost: its alarm asks for a recovery."""
    create_topics(emu)
    fx = make_array(emu.hosts, "db1", 3, size_gib=1024)
    backed_up(emu.hosts, emu.run, fx)
    configure_recovery(emu, "db1", instanceId=fx.instance_id, initialization="prewarm")
    emu.hosts.prewarm_mib_per_second = 200.0
    emu.hosts.lose_member(fx.instance_id, fx.member_ids[1])
    return fx.instance_id


def test_a_recovery_reports_the_array_usable_as_it_is_mounted_and_leaves_the_prewarm_running(
    emu: Emulation, slow_prewarm: str
) -> None:
    # WHEN the alarm starts a recovery whose restore prewarms for over an hour
    run = emu.wait(started(emu, alarm_event(slow_prewarm)))
    restore = restore_of(emu)
    # THEN the recovery ends as the array is mounted, long before the prewarm ends
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    mounted = polled(emu, "assemble", "success")
    assert 0 <= seconds(last_step(emu), mounted) <= PROMPT_SECONDS
    # AND says that the array is mounted and usable, that the prewarm goes on, and in which run
    out = run.output
    assert out["restoreExecutionArn"] == restore
    assert out["restore"]["prewarm"]["status"] == "running"
    assert "mounted and usable" in out["message"]
    assert f"the prewarm goes on in restore {restore}" in out["message"]
    # AND the restore reads every member to its end on its own
    finished = emu.wait(restore)
    assert finished.status == "SUCCEEDED", f"{finished.error}: {finished.cause}"
    assert finished.output["prewarm"]["status"] == "success"
    assert seconds(polled(emu, "prewarm", "success"), last_step(emu)) > 3600
    # AND the restore's end, which reaches the rule on it as every end does, tells no one again
    (told,) = [
        d.result.result
        for d in emu.services.execution_event(restore)
        if d.result is not None and d.result.module == "restore_ended"
    ]
    assert told["told"] == "none"


def test_a_restore_that_cannot_report_its_mount_ends_its_recovery_when_it_ends(
    emu: Emulation, slow_prewarm: str
) -> None:
    # GIVEN a recovery whose restore cannot report that its array is mounted (the function
    # that reports it crashes)
    crash(emu, "restore_report")
    arn = started(emu, alarm_event(slow_prewarm))
    restore = restore_of(emu)
    # WHEN the restore has read every member and its end reaches the rule on it
    finished = emu.wait(restore)
    assert finished.status == "SUCCEEDED", f"{finished.error}: {finished.cause}"
    deliveries = emu.services.execution_event(restore)
    # THEN the recovery ends then, with the restore's output
    (told,) = [d for d in deliveries if d.result is not None and d.result.module == "restore_ended"]
    assert told.result.result["told"] == "success"
    run = emu.wait(arn)
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["restore"]["prewarm"]["status"] == "success"
    assert run.output["restoreExecutionArn"] == restore
    assert "the prewarm goes on" not in run.output["message"]
    assert 0 <= seconds(last_step(emu), told.result.at) <= PROMPT_SECONDS


# Only a config that names an Auto Scaling group grants the lifecycle actions.
@pytest.fixture(scope="module")
def example_template() -> Path:
    return synthesize(config=EXAMPLE_CONFIG)


@pytest.fixture
def example_emu(example_template: Path) -> Iterator[Emulation]:
    with Emulation(example_template) as emulation:
        yield emulation


def test_a_launch_is_continued_as_the_array_is_mounted(example_emu: Emulation) -> None:
    # GIVEN analytics on 3 x 1 TiB members, whose restore prewarms for over an hour, and a new
    # instance of its group held in Pending:Wait
    emu = example_emu
    create_topics(emu)
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
    token = "6e7f8091-1111-2222-3333-444455556666"  # noqa: S105 - a lifecycle action id
    emu.double.lifecycle_action("analytics", "raidsnap-analytics", token, new)
    # WHEN the launch reaches the recovery trigger
    run = emu.wait(
        started(emu, launch_event("analytics", new, token=token, hook="raidsnap-analytics"))
    )
    # THEN the launch is continued as the array is mounted, and the recovery ends with it
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert emu.double.lifecycle_result(token)[0] == "CONTINUE"
    (complete,) = [
        c for c in emu.double.calls if c.operation == "CompleteLifecycleAction" and c.applied
    ]
    mounted = polled(emu, "assemble", "success")
    assert 0 <= seconds(complete.time, mounted) <= PROMPT_SECONDS
    assert 0 <= seconds(last_step(emu), mounted) <= PROMPT_SECONDS
    assert run.output["lifecycleAction"] == "CONTINUE"
    assert emu.wait(restore_of(emu)).status == "SUCCEEDED"


def test_a_restore_that_fails_fails_its_recovery_at_once_with_its_error(
    emu: Emulation, slow_prewarm: str
) -> None:
    # GIVEN a recovery whose restore cannot assemble the array
    emu.hosts.fail_next(
        "assemble",
        CommandOutcome(
            status="Failed",
            stderr="mdadm: /dev/md0 assembled from 2 drives - not enough to start the array.",
            exit_code=1,
            duration_seconds=3,
        ),
    )
    # WHEN it runs
    run = emu.wait(started(emu, alarm_event(slow_prewarm)))
    restore = restore_of(emu)
    # THEN it fails with the restore's error and cause as soon as the restore has cleaned up
    assert (run.status, run.error) == ("FAILED", "CommandFailed")
    assert "not enough to start the array" in str(run.cause)
    assert restore in str(run.cause)
    assert emu.wait(restore).status == "FAILED"
    assert emu.router is not None
    cleaned = max(i.at for i in emu.router.invocations if i.module == "restore_cleanup")
    assert 0 <= seconds(last_step(emu), cleaned) <= PROMPT_SECONDS


def test_a_stopped_restore_fails_its_recovery_as_soon_as_its_end_is_reported(
    emu: Emulation, slow_prewarm: str
) -> None:
    # GIVEN a recovery whose restore is stopped by hand while it creates its volumes
    held = HeldStep(emu, "restore_check_volumes")
    arn = started(emu, alarm_event(slow_prewarm))
    held.wait()
    restore = restore_of(emu)
    boto3.client("stepfunctions").stop_execution(executionArn=restore, cause="stopped by hand")
    held.release()
    assert emu.wait(restore).status == "ABORTED"
    # WHEN EventBridge delivers the restore's end
    deliveries = emu.services.execution_event(restore)
    # THEN the rule on the restore's end tells the recovery, which fails at once, naming the
    # stopped restore
    (told,) = [d for d in deliveries if d.result is not None and d.result.module == "restore_ended"]
    assert told.result.result["told"] == "failure"
    run = emu.wait(arn)
    assert (run.status, run.error) == ("FAILED", "RestoreAborted")
    assert restore in str(run.cause)
    assert 0 <= seconds(last_step(emu), told.result.at) <= PROMPT_SECONDS


def test_a_second_attempt_to_start_the_restore_names_the_restore_the_first_one_started(
    emu: Emulation, slow_prewarm: str
) -> None:
    """StartRestore runs again only when Step Functions retries it after an answer it could not
    read; the restore the first attempt started reports to that attempt's token, which no Task
    waits on any more. The second attempt says so, naming the restore, and starts nothing."""
    run = emu.wait(started(emu, alarm_event(slow_prewarm)))
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    restore = restore_of(emu)
    assert emu.wait(restore).status == "SUCCEEDED"
    # WHEN the step runs again for the same recovery, with another Task's token
    state = {"input": run.input, "execution": {"id": run.arn, "name": run.arn.rsplit(":", 1)[1]}}
    step = emu.invoke(
        "recovery_step", {"step": "restore", "taskToken": "a-later-attempt", "state": state}
    )
    # THEN it fails by name, naming the restore to follow, and no second restore starts
    assert step.error_type == "RestoreAlreadyStartedError"
    assert restore in str(step.error_message)
    sfn = boto3.client("stepfunctions")
    found = sfn.list_executions(stateMachineArn=emu.state_machines["restore"])["executions"]
    assert [e["executionArn"] for e in found] == [restore]
