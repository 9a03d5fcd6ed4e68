"""StopExecution takes an error and a cause of the caller's choosing (Step Functions API
Reference), and a stopped restore's end event carries them; the rule on restore ends passes a
stopped run's own error on to the parent's Task (ended._error_name: anything but States.*). The
recovery's RunRestore catches the error name "RestoreUsable" as the restore's report that the
array is mounted. A restore stopped before it mounted anything, with that error name, must
still fail its recovery: the array is not there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from raidsnap_emulation.harness import EXAMPLE_CONFIG, Emulation, synthesize
from raidsnap_emulation.world import (
    HeldStep,
    backed_up,
    configure_recovery,
    create_topics,
    launch_event,
    launch_instance,
    make_array,
    terminate,
)


@pytest.fixture(scope="module")
def example_template() -> Path:
    return synthesize(config=EXAMPLE_CONFIG)


@pytest.fixture
def example_emu(example_template: Path) -> Iterator[Emulation]:
    with Emulation(example_template) as emulation:
        yield emulation


def test_a_restore_stopped_with_the_reports_error_name_does_not_pass_for_mounted(
    example_emu: Emulation,
) -> None:
    emu = example_emu
    create_topics(emu)
    fx = make_array(emu.hosts, "analytics", 3, unrelated=0)
    backed_up(emu.hosts, emu.run, fx)
    configure_recovery(
        emu,
        "analytics",
        instanceId=fx.instance_id,
        autoScalingGroup="analytics",
        initialization="none",
    )
    terminate(fx.instance_id)
    new = launch_instance(
        "analytics-asg", fx.availability_zone, tag_array=False, auto_scaling_group="analytics"
    )
    token = "6e7f8091-1111-2222-3333-444455556666"  # noqa: S105 - a lifecycle action id
    emu.double.lifecycle_action("analytics", "raidsnap-analytics", token, new)
    # GIVEN a launch's restore that has not created its volumes yet
    held = HeldStep(emu, "restore_create_volumes")
    answer = emu.invoke(
        "recovery_start", launch_event("analytics", new, token=token, hook="raidsnap-analytics")
    )
    assert answer.error_type is None, answer.error_message
    arn = str(answer.result["executionArn"])
    held.wait()
    sfn = boto3.client("stepfunctions")
    (restore,) = sfn.list_executions(stateMachineArn=emu.state_machines["restore"])["executions"]
    # WHEN someone who may stop restores stops it with the error name of the mount report,
    # and the stop's end event (which carries StopExecution's error and cause, as the
    # ExecutionAborted event does; the emulation's StopExecution drops them, so the event is
    # given them here) reaches the rule on restore ends
    sfn.stop_execution(
        executionArn=restore["executionArn"], error="RestoreUsable", cause="stopped by hand"
    )
    held.release()
    assert emu.wait(restore["executionArn"]).status == "ABORTED"
    desc = sfn.describe_execution(executionArn=restore["executionArn"])
    told = emu.invoke(
        "restore_ended",
        {
            "version": "0",
            "id": "status-aborted",
            "detail-type": "Step Functions Execution Status Change",
            "source": "aws.states",
            "detail": {
                "executionArn": restore["executionArn"],
                "stateMachineArn": desc["stateMachineArn"],
                "name": desc["name"],
                "status": "ABORTED",
                "input": desc["input"],
                "output": None,
                "error": "RestoreUsable",
                "cause": "stopped by hand",
            },
        },
    )
    assert told.error_type is None, told.error_message
    run = emu.wait(arn)
    # THEN the recovery fails, and the launch is not put into service without its array
    assert "/dev/md0" not in emu.hosts.state(new).arrays
    assert run.status == "FAILED", run.output and run.output["message"]
    assert emu.double.lifecycle_result(token)[0] != "CONTINUE"
