"""The functions that answer a recovery's waiting Task may answer any task token in the account
(SendTaskSuccess and SendTaskFailure take no resource, Service Authorization Reference). Someone
who may only start restores must not be able to end, through raidsnap's functions, a Task that
raidsnap's own recovery of another array waits on, even holding its token (it is in the
recovery's history, TaskScheduled, which anyone who can follow recoveries reads): a restore
input that names a callback is refused, and whatever reaches the Task as a report of a mounted
array is checked before it is believed."""

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


def _token_of(recovery: str) -> str:
    """The token of the recovery's waiting Task, as its history shows it (the parameters of
    StartRestore's TaskScheduled event)."""
    sfn = boto3.client("stepfunctions")
    events = sfn.get_execution_history(executionArn=recovery, maxResults=1000)["events"]
    for event in events:
        details = event.get("taskScheduledEventDetails") or {}
        payload = json.loads(details.get("parameters") or "{}").get("Payload") or {}
        if payload.get("step") == "restore":
            return str(payload["taskToken"])
    raise AssertionError("the recovery scheduled no StartRestore")


def _entered(execution: str, state: str, timeout: float = 60.0) -> bool:
    sfn = boto3.client("stepfunctions")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = sfn.get_execution_history(executionArn=execution, maxResults=1000)["events"]
        names = {(e.get("stateEnteredEventDetails") or {}).get("name") for e in events}
        if state in names:
            return True
        time.sleep(0.05)
    return False


def _db1_recovery_waiting(emu: Emulation) -> tuple[str, str, dict[str, Any], HeldStep]:
    """db1's recovery waiting on its restore (held while it creates db1's volumes), and a
    callback with the token it waits on, as an operator who follows recoveries reads it."""
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
    # The restore's input names no callback any more (the token never travels in it) ...
    assert "callback" not in json.loads(sfn.describe_execution(executionArn=genuine)["input"])
    recovery = str(answer.result["executionArn"])
    # ... but the token is still there to read in the recovery's history.
    return recovery, genuine, {"taskToken": _token_of(recovery)}, held


def test_a_restore_someone_else_starts_cannot_fail_another_arrays_recovery(
    emu: Emulation,
) -> None:
    recovery, genuine, stolen, held = _db1_recovery_waiting(emu)
    # WHEN an operator starts a restore of an array that does not even exist, with that token
    other = emu.run("restore", {"array": "nosuch", "callback": stolen})
    # THEN the input is refused, for its callback
    assert (other.status, other.error) == ("FAILED", "InvalidInput"), other.cause
    assert "callback" in str(other.cause), other.cause
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
    request = {
        "array": "evil",
        "targetInstanceId": evil_copy,
        "mountPoint": "/data",
        "initialization": "none",
    }
    # WHEN it restores evil with db1's recovery's token: refused, for its callback
    refused = emu.run("restore", {**request, "callback": stolen})
    assert (refused.status, refused.error) == ("FAILED", "InvalidInput"), refused.cause
    # AND WHEN it restores evil without, and someone allowed SendTaskSuccess in the account hands
    # evil's mounted array to db1's recovery with that token
    other = emu.run("restore", request)
    assert other.status == "SUCCEEDED", f"{other.error}: {other.cause}"
    sfn = boto3.client("stepfunctions")
    forged = {**other.output, "executionArn": other.arn}
    sfn.send_task_success(taskToken=stolen["taskToken"], output=json.dumps(forged))
    # THEN db1's recovery did not believe it (Finish refused the report) and went back to
    # look at its own restore, which it still waits on
    assert _entered(recovery, "Settle"), "the recovery never looked at its restore again"
    status = sfn.describe_execution(executionArn=recovery)
    held.release()
    run = emu.wait(recovery)
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["restoreExecutionArn"] == genuine, run.output["message"]
    assert run.output["restore"]["array"] == "db1", run.output["message"]
    assert status["status"] == "RUNNING"
