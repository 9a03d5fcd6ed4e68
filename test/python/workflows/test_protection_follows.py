"""After a recovery moves an array to another instance, what protected it follows it there.

The stack's attached-EBS alarm names one instance (its InstanceId dimension) and the termination
rule matches the configured instances. After a move, a failure of the array's new instance must
still start a recovery, and events about the instance it left must not start one; the recovery
says what protects the array now, in its output and in its notification. Runs on the stack
synthesized with the example config, where db1 has an alarm and a replacement.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from raidsnap_emulation.harness import EXAMPLE_CONFIG, Emulation, Execution, synthesize
from raidsnap_emulation.world import (
    ArrayFixture,
    attach_recovery_onto_standby,
    create_topics,
    instance_state_event,
    instance_tags,
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


def _watched(alarm: str) -> str:
    found = boto3.client("cloudwatch").describe_alarms(AlarmNames=[alarm])["MetricAlarms"]
    dims = {d["Name"]: d["Value"] for d in found[0]["Dimensions"]}
    return dims["InstanceId"]


def _published(emu: Emulation) -> list[dict[str, Any]]:
    return [c.params for c in emu.double.calls if (c.service, c.operation) == ("sns", "Publish")]


def _recover_from_alarm(emu: Emulation, alarm: str) -> Execution:
    return emu.wait(recovery_started_by_alarm(emu, alarm))


def _moved_to_standby(emu: Emulation) -> tuple[ArrayFixture, str, str, Execution]:
    fx, standby, alarm = attach_recovery_onto_standby(emu, "db1")
    assert _watched(alarm) == fx.instance_id  # as deployed with this instance configured
    emu.double.impair_volume(fx.member_ids[1])  # evidence: a member fails its status check
    run = _recover_from_alarm(emu, alarm)
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    # The recovery ends as the array is mounted; its restore holds the array's restore lock
    # until its own last step.
    assert emu.wait(run.output["restoreExecutionArn"]).status == "SUCCEEDED"
    return fx, standby, alarm, run


def test_after_a_move_the_alarm_watches_the_new_instance_and_says_so(emu: Emulation) -> None:
    _, standby, alarm, run = _moved_to_standby(emu)
    assert run.output["restore"]["targetInstanceId"] == standby
    assert _watched(alarm) == standby
    protection = run.output["protection"]
    assert protection["instanceId"] == standby
    assert protection["alarm"] == alarm and protection["alarmMoved"] is True
    message = run.output["message"]
    assert f"{alarm} now watches {standby}" in message, message
    # The operators are told, in the recovery's own notification.
    told = [p for p in _published(emu) if "recovered" in str(p.get("Subject"))]
    assert told and f"{alarm} now watches {standby}" in str(told[-1]["Message"]), told
    assert "instanceId" in str(told[-1]["Message"])  # and what to change in the config


def test_after_a_move_a_failure_of_the_new_instance_is_recovered_in_place(
    emu: Emulation,
) -> None:
    fx, standby, alarm, _ = _moved_to_standby(emu)
    emu.clock.advance(3600)
    restored = emu.hosts.state(standby).arrays["/dev/md0"].members
    emu.double.impair_volume(restored[0])
    run = _recover_from_alarm(emu, alarm)
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    out = run.output["restore"]
    # The configured replacement already holds the array: it is replaced where it is.
    assert (out["mode"], out["targetInstanceId"]) == ("replace", standby)
    # The instance the array left keeps its old members, untouched.
    assert emu.hosts.state(fx.instance_id).arrays["/dev/md0"].members == fx.member_ids


def test_events_about_the_instance_the_array_left_start_nothing_and_say_why(
    emu: Emulation,
) -> None:
    fx, standby, _, _ = _moved_to_standby(emu)
    sent = len(_published(emu))
    terminate(fx.instance_id)
    # As the termination rule delivers it (the rule's instances: the last test).
    answer = emu.invoke("recovery_start", instance_state_event(fx.instance_id, "terminated"))
    assert answer.error_type is None, answer.error_message
    assert answer.result["started"] is False
    assert standby in answer.result["reason"], answer.result
    skipped = _published(emu)[sent:]
    assert len(skipped) == 1 and "no recovery" in str(skipped[0]["Subject"]), skipped
    assert standby in str(skipped[0]["Message"])


def test_the_termination_rule_covers_the_replacement_too(emu: Emulation) -> None:
    """The example config's db1: instance i-0123456789abcdef0, replacement i-0fedcba9876543210.
    Once the array lives on the replacement, its termination is what must be noticed."""
    rules = [
        json.loads(str(r["Properties"]["EventPattern"]))
        if isinstance(r["Properties"]["EventPattern"], str)
        else r["Properties"]["EventPattern"]
        for r in emu.template.of_type("AWS::Events::Rule").values()
        if "EC2 Instance State-change Notification" in str(r["Properties"].get("EventPattern", ""))
    ]
    watched = sorted(i for r in rules for i in r["detail"]["instance-id"])
    assert watched == ["i-0123456789abcdef0", "i-0fedcba9876543210"]


def test_the_end_of_the_instance_holding_the_array_after_a_move_is_reported(
    emu: Emulation,
) -> None:
    _, standby, _, _ = _moved_to_standby(emu)
    sent = len(_published(emu))
    terminate(standby)
    answer = emu.invoke("recovery_start", instance_state_event(standby, "terminated"))
    assert answer.error_type is None, answer.error_message
    assert answer.result["started"] is False
    assert "no other instance is configured" in answer.result["reason"], answer.result
    told = _published(emu)[sent:]
    assert len(told) == 1 and "by hand" in str(told[0]["Message"]), told


def test_an_alarm_that_cannot_follow_leaves_the_recovery_succeeded_and_says_so(
    emu: Emulation,
) -> None:
    fx, standby, alarm = attach_recovery_onto_standby(emu, "db1")
    emu.double.fail("cloudwatch", "PutMetricAlarm", times=20, code="Throttling")
    emu.double.impair_volume(fx.member_ids[1])
    run = _recover_from_alarm(emu, alarm)
    # The array is on the replacement and stays there: no failure path gives the tag back.
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert instance_tags(standby)["raidsnap:array"] == "db1"
    assert _watched(alarm) == fx.instance_id
    protection = run.output["protection"]
    assert protection["alarmMoved"] is False and "Throttling" in protection["problem"]
    assert "point it there by hand" in run.output["message"]
