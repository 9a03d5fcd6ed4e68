"""Executions that run at once share the virtual clock as they share time on AWS: their waits
overlap instead of adding up, a parent that runs a nested execution resumes when it ends, and
one scenario gives the same emulated times run after run."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
import pytest

from raidsnap_emulation.clock import ClockStalledError
from raidsnap_emulation.harness import ACCOUNT, Emulation, synthesize
from raidsnap_emulation.world import (
    HeldStep,
    alarm_event,
    backed_up,
    configure_recovery,
    make_array,
)

ROLE = f"arn:aws:iam::{ACCOUNT}:role/raidsnap-emulation"
# The last state of each test machine: one call the double records, with the emulated time at
# which the execution got there.
MARK = {
    "Type": "Task",
    "Resource": "arn:aws:states:::aws-sdk:ec2:describeAvailabilityZones",
    "Parameters": {"Filters": [{"Name": "zone-name", "Values.$": "States.Array($$.Execution.Id)"}]},
    "ResultPath": "$.mark",
    "End": True,
}
WAITS = {
    "StartAt": "First",
    "States": {
        "First": {"Type": "Wait", "SecondsPath": "$.first", "Next": "Second"},
        "Second": {"Type": "Wait", "SecondsPath": "$.second", "Next": "Mark"},
        "Mark": MARK,
    },
}


def parent_of(child_machine: str) -> dict[str, Any]:
    """Waits, runs ``child_machine`` nested (.sync:2) for $.child seconds, waits again."""
    return {
        "StartAt": "Before",
        "States": {
            "Before": {"Type": "Wait", "SecondsPath": "$.before", "Next": "Nested"},
            "Nested": {
                "Type": "Task",
                "Resource": "arn:aws:states:::states:startExecution.sync:2",
                "Parameters": {
                    "StateMachineArn": child_machine,
                    "Name.$": "States.Format('{}-child', $$.Execution.Name)",
                    "Input": {"first.$": "$.child", "second": 0},
                },
                "ResultSelector": {"arn.$": "$.ExecutionArn"},
                "ResultPath": "$.nested",
                "Next": "After",
            },
            "After": {"Type": "Wait", "SecondsPath": "$.after", "Next": "Mark"},
            "Mark": MARK,
        },
    }


@pytest.fixture(scope="module")
def template() -> Path:
    return synthesize()


@pytest.fixture
def emu(template: Path) -> Iterator[Emulation]:
    with Emulation(template) as emulation:
        yield emulation


def machine(emu: Emulation, name: str, definition: dict[str, Any]) -> str:
    return str(
        emu.sfn.create_state_machine(name=name, definition=json.dumps(definition), roleArn=ROLE)[
            "stateMachineArn"
        ]
    )


def start(emu: Emulation, machine_arn: str, payload: dict[str, Any], name: str) -> str:
    return str(
        emu.sfn.start_execution(stateMachineArn=machine_arn, name=name, input=json.dumps(payload))[
            "executionArn"
        ]
    )


def marked(call: Any) -> str | None:
    """The execution whose last state made this call, if one did."""
    if call.operation != "DescribeAvailabilityZones" or "Filters" not in call.params:
        return None
    return str(call.params["Filters"][0]["Values"][0])


def ended(emu: Emulation, execution_arn: str, begin: datetime) -> float:
    """Emulated seconds from ``begin`` to the execution's last state."""
    (at,) = [c.time for c in emu.double.calls if marked(c) == execution_arn]
    return (at - begin).total_seconds()


def succeeded(emu: Emulation, *arns: str) -> list[Any]:
    runs = [emu.wait(arn) for arn in arns]
    assert [r.status for r in runs] == ["SUCCEEDED"] * len(runs), [(r.error, r.cause) for r in runs]
    return runs


def test_two_executions_whose_waits_overlap_end_at_the_longer_not_the_sum(emu: Emulation) -> None:
    # GIVEN two executions started at one instant, one waiting 100 s then 200 s, one 250 s
    waits = machine(emu, "waits", WAITS)
    begin = emu.clock.now()
    with emu.together():
        a = start(emu, waits, {"first": 100, "second": 200}, "a")
        b = start(emu, waits, {"first": 250, "second": 0}, "b")
    # WHEN both run to their end
    succeeded(emu, a, b)
    # THEN each ends when its own waits are over, and the clock moved 300 s, not 550 s
    assert (ended(emu, a, begin), ended(emu, b, begin)) == (300, 250)
    assert emu.clock.seconds_since(begin) == 300


def test_a_parent_resumes_at_the_instant_its_nested_execution_ends(emu: Emulation) -> None:
    # GIVEN a parent that waits 10 s, runs a child of 100 s nested (.sync:2), then waits 30 s
    waits = machine(emu, "waits", WAITS)
    parent = machine(emu, "parent", parent_of(waits))
    begin = emu.clock.now()
    alone = start(emu, parent, {"before": 10, "child": 100, "after": 30}, "alone")
    (run,) = succeeded(emu, alone)
    # THEN the child ends at 110 s and the parent at 140 s: no time between them
    assert ended(emu, run.output["nested"]["arn"], begin) == 110
    assert ended(emu, alone, begin) == 140
    # AND so it does while another execution (waiting 60 s twice) runs meanwhile
    begin = emu.clock.now()
    with emu.together():
        parent_run = start(emu, parent, {"before": 10, "child": 100, "after": 30}, "parent")
        other = start(emu, waits, {"first": 60, "second": 60}, "other")
    nested, _ = succeeded(emu, parent_run, other)
    assert ended(emu, nested.output["nested"]["arn"], begin) == 110
    assert ended(emu, parent_run, begin) == 140
    assert ended(emu, other, begin) == 120
    assert emu.clock.seconds_since(begin) == 140


def test_parallel_branches_and_map_iterations_wait_at_once(emu: Emulation) -> None:
    # GIVEN a Parallel state whose branches wait 100 s and 200 s, then a Map state whose
    # iterations wait 100 s, 200 s and 50 s (Step Functions runs branches and iterations at once)
    def waiting(seconds_path: str) -> dict[str, Any]:
        return {
            "StartAt": "W",
            "States": {"W": {"Type": "Wait", "SecondsPath": seconds_path, "End": True}},
        }

    definition = {
        "StartAt": "Both",
        "States": {
            "Both": {
                "Type": "Parallel",
                "Branches": [waiting("$.a"), waiting("$.b")],
                "ResultPath": None,
                "Next": "Each",
            },
            "Each": {
                "Type": "Map",
                "ItemsPath": "$.items",
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "INLINE"},
                    **waiting("$.seconds"),
                },
                "ResultPath": None,
                "Next": "Mark",
            },
            "Mark": MARK,
        },
    }
    items = [{"seconds": s} for s in (100, 200, 50)]
    begin = emu.clock.now()
    arn = start(emu, machine(emu, "fan", definition), {"a": 100, "b": 200, "items": items}, "fan")
    succeeded(emu, arn)
    # THEN each ends with its longest wait: 200 s + 200 s
    assert ended(emu, arn, begin) == 400


def _ties(template: Path) -> list[tuple[str, float]]:
    """Three executions (one nested) whose last waits all end at 200 s: each one's end, in the
    order the double saw them."""
    with Emulation(template) as emu:
        waits = machine(emu, "waits", WAITS)
        parent = machine(emu, "parent", parent_of(waits))
        begin = emu.clock.now()
        with emu.together():
            arns = {
                "a": start(emu, waits, {"first": 100, "second": 100}, "a"),
                "b": start(emu, waits, {"first": 200, "second": 0}, "b"),
                "p": start(emu, parent, {"before": 50, "child": 150, "after": 0}, "p"),
            }
        runs = dict(zip(arns, succeeded(emu, *arns.values()), strict=True))
        arns["child"] = runs["p"].output["nested"]["arn"]
        names = {arn: name for name, arn in arns.items()}
        return [
            (names[arn], (c.time - begin).total_seconds())
            for c in emu.double.calls
            if (arn := marked(c)) is not None
        ]


def _recovery(template: Path) -> list[tuple[str, str, float]]:
    """An automated recovery of a lost member (the recovery and the restore it starts run at
    once): every function it invoked, with its emulated offset from the alarm."""
    with Emulation(template) as emu:
        fx = make_array(emu.hosts, "db1", 3)
        backed_up(emu.hosts, emu.run, fx)
        configure_recovery(emu, "db1", instanceId=fx.instance_id, mode="replace")
        boto3.client("ec2").detach_volume(VolumeId=fx.member_ids[1], Force=True)
        emu.clock.advance(emu.double.detach_seconds + 1)
        emu.hosts.lose_member(fx.instance_id, fx.member_ids[1])
        assert emu.router is not None
        mark, begin = len(emu.router.invocations), emu.clock.now()
        started = emu.invoke("recovery_start", alarm_event(fx.instance_id))
        assert started.error_type is None, started.error_message
        recovery = emu.wait(started.result["executionArn"])
        assert recovery.status == "SUCCEEDED", f"{recovery.error}: {recovery.cause}"
        machine_arn = emu.state_machines["restore"]
        (restore,) = emu.sfn.list_executions(stateMachineArn=machine_arn)["executions"]
        assert emu.wait(restore["executionArn"]).status == "SUCCEEDED"
        return [
            (i.module, str(i.event.get("step", "")), (i.at - begin).total_seconds())
            for i in emu.router.invocations[mark:]
        ]


def test_the_same_scenario_gives_the_same_emulated_times_every_run(template: Path) -> None:
    # GIVEN executions whose waits end at one instant
    first = _ties(template)
    # THEN they end at the same times, in the same order, run after run
    assert sorted(t for _, t in first) == [200, 200, 200, 200]
    assert [_ties(template) for _ in range(3)] == [first] * 3

    # AND an automated recovery (a recovery following the restore it started) invokes the same
    # functions at the same emulated times, run after run (calls made at one instant by branches
    # of a Parallel have no order on AWS either, so each instant is compared as a whole)
    def in_time_order() -> list[tuple[str, str, float]]:
        return sorted(_recovery(template), key=lambda call: (call[2], call[0], call[1]))

    timeline = in_time_order()
    assert [in_time_order() for _ in range(2)] == [timeline] * 2


def test_an_execution_nothing_can_move_on_is_reported_with_what_it_waits_for(
    emu: Emulation,
) -> None:
    # GIVEN an execution waiting for a task token that no one in the emulation will send
    sqs = boto3.client("sqs")
    queue = sqs.create_queue(QueueName="tokens")["QueueUrl"]
    asks = {
        "StartAt": "Ask",
        "States": {
            "Ask": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                "Parameters": {"QueueUrl": queue, "MessageBody": {"token.$": "$$.Task.Token"}},
                "End": True,
            }
        },
    }
    arn = start(emu, machine(emu, "asks", asks), {}, "asks")
    # WHEN the test waits for it, THEN it hears at once (not after its timeout) what waits
    with pytest.raises(ClockStalledError, match="waiting for a task token") as stalled:
        emu.wait(arn, timeout=60)
    assert "asks" in str(stalled.value)
    # AND the world outside can still end it
    (message,) = sqs.receive_message(QueueUrl=queue)["Messages"]
    token = json.loads(message["Body"])["token"]
    emu.sfn.send_task_failure(taskToken=token, error="Nobody", cause="no one answers")
    assert emu.wait(arn).status == "FAILED"


def _asks(queue: str, **task: Any) -> dict[str, Any]:
    """A Task that sends its token to ``queue`` and waits for an answer."""
    return {
        "Type": "Task",
        "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
        "Parameters": {"QueueUrl": queue, "MessageBody": {"token.$": "$$.Task.Token"}},
        **task,
    }


def _waiting_for_a_token(emu: Emulation) -> list[str]:
    return [line for line in emu.clock.describe().splitlines() if "task token" in line]


def test_a_failed_branch_ends_the_task_another_branch_waits_on(emu: Emulation) -> None:
    # GIVEN a Parallel whose first branch waits for a task token and whose second fails
    # ("Parallel workflow state", developer guide, error handling: a failed branch fails the
    # Parallel, and Step Functions stops all its branches)
    queue = boto3.client("sqs").create_queue(QueueName="tokens")["QueueUrl"]
    definition = {
        "StartAt": "Both",
        "States": {
            "Both": {
                "Type": "Parallel",
                "Branches": [
                    {"StartAt": "Ask", "States": {"Ask": _asks(queue, End=True)}},
                    {
                        "StartAt": "Pause",
                        "States": {
                            "Pause": {"Type": "Wait", "Seconds": 30, "Next": "Give up"},
                            "Give up": {"Type": "Fail", "Error": "GaveUp", "Cause": "enough"},
                        },
                    },
                ],
                "End": True,
            }
        },
    }
    arn = start(emu, machine(emu, "branches", definition), {}, "branches")
    # WHEN the second branch fails
    run = emu.wait(arn)
    assert (run.status, run.error) == ("FAILED", "GaveUp")
    # THEN the first branch's Task no longer waits: no thread of it is left behind
    deadline = time.monotonic() + 5
    while _waiting_for_a_token(emu) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _waiting_for_a_token(emu) == [], emu.clock.describe()
    # AND its token is refused as that of a closed Task
    (message,) = boto3.client("sqs").receive_message(QueueUrl=queue)["Messages"]
    token = json.loads(message["Body"])["token"]
    with pytest.raises(emu.sfn.exceptions.TaskTimedOut):
        emu.sfn.send_task_success(taskToken=token, output="{}")


def test_a_task_that_nobody_answers_times_out_on_the_clock(emu: Emulation) -> None:
    # GIVEN a Task waiting for a token with TimeoutSeconds of 3 days, and nobody to answer, in a
    # Parallel's branch and on its own
    emu.clock.task_timeouts = True
    queue = boto3.client("sqs").create_queue(QueueName="tokens")["QueueUrl"]
    timed_out = [{"ErrorEquals": ["States.Timeout"], "ResultPath": None, "Next": "Alone"}]
    definition = {
        "StartAt": "Both",
        "States": {
            "Both": {
                "Type": "Parallel",
                "Branches": [
                    {
                        "StartAt": "Ask",
                        "States": {"Ask": _asks(queue, TimeoutSeconds=259200, End=True)},
                    }
                ],
                "Catch": timed_out,
                "Next": "Alone",
            },
            "Alone": _asks(
                queue,
                TimeoutSeconds=3600,
                Catch=[{"ErrorEquals": ["States.Timeout"], "ResultPath": None, "Next": "Mark"}],
                Next="Mark",
            ),
            "Mark": MARK,
        },
    }
    begin = emu.clock.now()
    arn = start(emu, machine(emu, "asks", definition), {}, "asks")
    # THEN each times out on the emulated clock (States.Timeout, which fails the Parallel under
    # that name, for its Catch), and the run goes on: 3 days, then 1 hour
    succeeded(emu, arn)
    assert ended(emu, arn, begin) == 259200 + 3600
    assert _waiting_for_a_token(emu) == [], emu.clock.describe()


def test_a_stop_keeps_its_error_and_cause_in_the_history(emu: Emulation) -> None:
    # GIVEN an execution waiting for a task token
    queue = boto3.client("sqs").create_queue(QueueName="tokens")["QueueUrl"]
    definition = {"StartAt": "Ask", "States": {"Ask": _asks(queue, End=True)}}
    arn = start(emu, machine(emu, "asks", definition), {}, "stopped")
    while not boto3.client("sqs").receive_message(QueueUrl=queue).get("Messages"):
        time.sleep(0.01)
    # WHEN it is stopped with an error and a cause (StopExecution)
    emu.sfn.stop_execution(executionArn=arn, error="ByHand", cause="an operator stopped it")
    assert emu.wait(arn).status == "ABORTED"
    # THEN its ExecutionAborted event carries them (ExecutionAbortedEventDetails)
    aborted: list[dict[str, Any]] = []
    deadline = time.monotonic() + 5
    while not aborted and time.monotonic() < deadline:
        events = emu.sfn.get_execution_history(executionArn=arn)["events"]
        aborted = [e for e in events if e["type"] == "ExecutionAborted"]
    details = aborted[0]["executionAbortedEventDetails"]
    assert (details.get("error"), details.get("cause")) == ("ByHand", "an operator stopped it")


def test_no_task_times_out_while_a_test_holds_a_step(emu: Emulation) -> None:
    # GIVEN one branch waiting for a token (TimeoutSeconds 60) while the other is in a function
    # the test holds, and nothing else to run
    emu.clock.task_timeouts = True
    queue = boto3.client("sqs").create_queue(QueueName="tokens")["QueueUrl"]
    assert emu.router is not None
    function = next(
        name
        for name, f in emu.router.functions.items()
        if f.handler.endswith(".monitor_set_age.handler")
    )
    held = HeldStep(emu, "monitor_set_age")
    step = {
        "Type": "Task",
        "Resource": f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:{function}",
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": None, "Next": "Done"}],
        "ResultPath": None,
        "Next": "Done",
    }
    definition = {
        "StartAt": "Both",
        "States": {
            "Both": {
                "Type": "Parallel",
                "Branches": [
                    {
                        "StartAt": "Ask",
                        "States": {"Ask": _asks(queue, TimeoutSeconds=60, End=True)},
                    },
                    {"StartAt": "Held", "States": {"Held": step, "Done": {"Type": "Succeed"}}},
                ],
                "End": True,
            }
        },
    }
    arn = start(emu, machine(emu, "held", definition), {}, "held")
    held.wait()
    # WHEN the test takes its time (real time) before it releases the step
    time.sleep(1)
    assert emu.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING", emu.clock.describe()
    held.release()
    # THEN the waiting Task did not time out meanwhile: its answer still reaches it
    (message,) = boto3.client("sqs").receive_message(QueueUrl=queue)["Messages"]
    emu.sfn.send_task_success(taskToken=json.loads(message["Body"])["token"], output="{}")
    assert emu.wait(arn).status == "SUCCEEDED"
