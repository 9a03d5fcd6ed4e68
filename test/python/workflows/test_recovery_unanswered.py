"""When Step Functions refuses both of the restore's answers for one reason (an SCP or
permissions boundary that denies states:SendTask*, say; SendTaskSuccess and SendTaskFailure
answer AccessDeniedException as every API does), a recovery whose StartRestore Task
(lambda:invoke.waitForTaskToken) waited with no TimeoutSeconds would wait for its own 73-hour
timeout, and a launch's lifecycle action, kept alive by heartbeats up to its global timeout (48
hours), then ends with its default result, ABANDON, and the group terminates the instance on
which the restore mounted the array. A launch's heartbeat branch looks at the restore each time;
any recovery's wait times out when the restore's own timeout is past."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from launches import held_launch

from raidsnap_emulation.clock import ClockStalledError
from raidsnap_emulation.harness import EXAMPLE_CONFIG, Emulation, synthesize
from raidsnap_emulation.world import (
    alarm_event,
    backed_up,
    configure_recovery,
    launch_event,
    make_array,
)


@pytest.fixture(scope="module")
def example_template() -> Path:
    return synthesize(config=EXAMPLE_CONFIG)


@pytest.fixture
def example_emu(example_template: Path) -> Iterator[Emulation]:
    with Emulation(example_template) as emulation:
        yield emulation


def test_a_recovery_whose_restore_cannot_answer_it_does_not_hold_then_abandon_the_launch(
    example_emu: Emulation,
) -> None:
    emu = example_emu
    token = "6e7f8091-1111-2222-3333-444455556666"  # noqa: S105 - a lifecycle action id
    _, new = held_launch(emu, token)
    # GIVEN Step Functions refuses the restore's answers
    for op in ("SendTaskSuccess", "SendTaskFailure"):
        emu.double.fail("stepfunctions", op, times=1000, code="AccessDeniedException")
    # WHEN the launch's recovery runs, its restore mounts the array on the new instance, and
    # the restore's end reaches the rule on it
    answer = emu.invoke(
        "recovery_start", launch_event("analytics", new, token=token, hook="raidsnap-analytics")
    )
    assert answer.error_type is None, answer.error_message
    arn = str(answer.result["executionArn"])
    sfn = boto3.client("stepfunctions")
    restore = ""
    while not restore:
        found = sfn.list_executions(stateMachineArn=emu.state_machines["restore"])["executions"]
        restore = str(found[0]["executionArn"]) if found else ""
    restored = emu.wait(restore)
    assert restored.status == "SUCCEEDED", f"{restored.error}: {restored.cause}"
    assert restored.output["targetInstanceId"] == new
    emu.services.execution_event(restore)
    # THEN the recovery ends, and the instance that holds the mounted array stays in service
    try:
        status = emu.wait(arn, timeout=300).status
    except ClockStalledError:
        # Nothing is left to wake the recovery up: only its token, which nobody answers.
        status = sfn.describe_execution(executionArn=arn)["status"]
    waited = emu.clock.describe().splitlines()[0]
    result, beats = emu.double.lifecycle_result(token)
    assert result != "ABANDON", (status, waited, len(beats))
    assert status in ("SUCCEEDED", "FAILED"), (status, waited)


def test_a_recovery_whose_restore_cannot_answer_it_ends_at_its_wait_with_the_restore_it_finds(
    emu: Emulation,
) -> None:
    # GIVEN db1 (no lifecycle action: nothing looks at the restore while the recovery waits),
    # and Step Functions refuses the restore's answers (Tasks time out on the emulated clock)
    emu.clock.task_timeouts = True
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    configure_recovery(emu, "db1", instanceId=fx.instance_id, initialization="none")
    emu.hosts.lose_member(fx.instance_id, fx.member_ids[1])
    for op in ("SendTaskSuccess", "SendTaskFailure"):
        emu.double.fail("stepfunctions", op, times=1000, code="AccessDeniedException")
    # WHEN its alarm starts a recovery, whose restore mounts the array and ends
    begin = emu.clock.now()
    answer = emu.invoke("recovery_start", alarm_event(fx.instance_id))
    assert answer.error_type is None, answer.error_message
    arn = str(answer.result["executionArn"])
    run = emu.wait(arn, timeout=300)
    # THEN the wait for its answer times out (the restore's own timeout and 15 minutes), the
    # recovery looks at the restore, and ends with the array it finds mounted
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    (restore,) = boto3.client("stepfunctions").list_executions(
        stateMachineArn=emu.state_machines["restore"]
    )["executions"]
    assert run.output["restoreExecutionArn"] == restore["executionArn"]
    assert run.output["restore"]["array"] == "db1"
    entered = [(e.get("stateEnteredEventDetails") or {}).get("name") for e in run.events]
    assert "Settle" in entered
    assert run.ended_at is not None
    assert (run.ended_at - begin).total_seconds() >= 259200 + 900
