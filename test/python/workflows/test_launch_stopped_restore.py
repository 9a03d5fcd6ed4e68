"""A launch's restore is stopped by hand in its attach step (which tags the new
instance with the array first), before it assembled anything. The stop ends the recovery
(RestoreAborted, through the restore's end event), whose failure path asks whether "the array
lives there now" by the target's raidsnap:array tag alone: nothing takes that tag off after a
stop (the stop cleanup leaves attached volumes and tags alone), so the launch is completed with
CONTINUE and the cause says the restore assembled and mounted the array there, which it never
did: an instance goes into service with no array at its mount point."""

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


def test_a_launch_whose_restore_was_stopped_before_assembly_is_not_continued(
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
    # GIVEN the launch's restore is in its attach step (which tags the new instance first)
    held = HeldStep(emu, "restore_attach")
    answer = emu.invoke(
        "recovery_start", launch_event("analytics", new, token=token, hook="raidsnap-analytics")
    )
    assert answer.error_type is None, answer.error_message
    arn = str(answer.result["executionArn"])
    held.wait()
    sfn = boto3.client("stepfunctions")
    (restore,) = sfn.list_executions(stateMachineArn=emu.state_machines["restore"])["executions"]
    # WHEN an operator stops it there, and the stop reaches the rules
    sfn.stop_execution(executionArn=restore["executionArn"], cause="stopped by hand")
    held.release()
    assert emu.wait(restore["executionArn"]).status == "ABORTED"
    emu.services.execution_event(restore["executionArn"])
    run = emu.wait(arn)
    # THEN the recovery fails, and does not put into service an instance with no array mounted
    assert (run.status, run.error) == ("FAILED", "RestoreAborted"), run.cause
    assert "/dev/md0" not in emu.hosts.state(new).arrays
    assert emu.double.lifecycle_result(token)[0] == "ABANDON", run.cause
