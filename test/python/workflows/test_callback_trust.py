"""A restore's ``callback.taskToken`` comes from whoever starts the restore, and the functions that
answer it may answer any task token in the account (SendTaskSuccess and SendTaskFailure take no
resource, Service Authorization Reference). Someone who may only start restores must not be able
to end, through raidsnap's functions, a Task that raidsnap's own recovery of another array waits
on: the recovery's token is in its restore's input, which anyone who can follow restores reads
(DescribeExecution, README "Operator roles")."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    HeldStep,
    alarm_event,
    backed_up,
    configure_recovery,
    create_topics,
    launch_instance,
    make_array,
)


def _restore_of(emu: Emulation, timeout: float = 60.0) -> str:
    sfn = boto3.client("stepfunctions")
    deadline = time.monotonic() + timeout
    while True:
        found = sfn.list_executions(stateMachineArn=emu.state_machines["restore"])["executions"]
        if found or time.monotonic() > deadline:
            (restore,) = found
            return str(restore["executionArn"])
        time.sleep(0.01)


def _db1_recovery_waiting(emu: Emulation) -> tuple[str, str, dict[str, Any], HeldStep]:
    """db1's recovery waiting on its restore (held while it creates db1's volumes), and the
    callback an operator who follows restores reads in that restore's input."""
    create_topics(emu)
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    configure_recovery(emu, "db1", instanceId=fx.instance_id, initialization="none")
    emu.hosts.lose_member(fx.instance_id, fx.member_ids[1])
    held = HeldStep(emu, "restore_check_volumes")
    answer = emu.invoke("recovery_start", alarm_event(fx.instance_id))
    assert answer.error_type is None, answer.error_message
    held.wait()
    genuine = _restore_of(emu)
    sfn = boto3.client("stepfunctions")
    stolen = json.loads(sfn.describe_execution(executionArn=genuine)["input"])["callback"]
    return str(answer.result["executionArn"]), genuine, stolen, held


def test_a_restore_someone_else_starts_cannot_fail_another_arrays_recovery(
    emu: Emulation,
) -> None:
    recovery, genuine, stolen, held = _db1_recovery_waiting(emu)
    # WHEN an operator starts a restore of an array that does not even exist, with that token
    other = emu.run("restore", {"array": "nosuch", "callback": stolen})
    assert other.status == "FAILED"
    held.release()
    # THEN db1's recovery ends with its own restore, not with the other run's failure
    run = emu.wait(recovery)
    assert "nosuch" not in str(run.cause), run.cause
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["restoreExecutionArn"] == genuine


def test_a_restore_of_another_array_cannot_report_itself_as_the_recovered_array(
    emu: Emulation,
) -> None:
    # GIVEN the team owning "evil" may restore evil onto an instance of its own
    evil = make_array(emu.hosts, "evil", 2, unrelated=0)
    backed_up(emu.hosts, emu.run, evil)
    evil_copy = launch_instance("evil", evil.availability_zone)
    recovery, genuine, stolen, held = _db1_recovery_waiting(emu)
    # WHEN it restores evil with db1's recovery's token
    other = emu.run(
        "restore",
        {
            "array": "evil",
            "targetInstanceId": evil_copy,
            "mountPoint": "/data",
            "initialization": "none",
            "callback": stolen,
        },
    )
    assert other.status == "SUCCEEDED", f"{other.error}: {other.cause}"
    # THEN db1's recovery did not take evil's restore for db1's: it still waits on its own
    status = boto3.client("stepfunctions").describe_execution(executionArn=recovery)
    held.release()
    run = emu.wait(recovery)
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["restoreExecutionArn"] == genuine, run.output["message"]
    assert run.output["restore"]["array"] == "db1", run.output["message"]
    assert status["status"] == "RUNNING"
