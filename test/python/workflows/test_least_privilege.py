"""Each function's role allows exactly the AWS actions the function calls.

The scenarios below drive every path of the workflows on the emulation; the double attributes
each AWS call to the function that made it. Two properties follow for every function in the
synthesized template:
- sufficient: every action it called is allowed by its role (else AWS would deny it);
- minimal: every action its role allows was called in some scenario, or is listed in
  NOT_EXERCISED with the reason the scenarios cannot reach it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation, Template
from raidsnap_emulation.world import (
    HeldStep,
    alarm_event,
    backed_up,
    configure_recovery,
    create_topics,
    launch_instance,
    make_array,
    make_old_set,
    sets_of,
    tags_of,
    terminate,
)

IAM_PREFIX = {"stepfunctions": "states"}
# Written by the runtime or the platform, not by the function's code.
PLATFORM = ("logs:", "xray:")

# KMS is used by EC2 (encrypted volumes), DynamoDB (the lock table) and SNS (the topic) on a
# function's behalf when data is encrypted with a customer key; raidsnap's own code never calls
# KMS (test_no_function_calls_kms_itself), and the emulation encrypts nothing. That these grants
# are scoped (kms:ViaService, the stack key) is proven on the template in test/iam.test.ts.
DELEGATED = ("kms:",)

NOT_EXERCISED: dict[str, dict[str, str]] = {
    "backup_snapshot": {
        "ec2:DeleteSnapshot": (
            "removes a snapshot of a volume that was attached between the member lookup and "
            "CreateSnapshots; staging that race needs an attach inside one API call"
        ),
    },
    "restore_create_volumes": {
        "ec2:CreateTags": (
            "EC2 authorizes CreateVolume's TagSpecifications as CreateTags (ec2:CreateAction="
            "CreateVolume); it is part of the CreateVolume call, not a call of its own"
        ),
    },
}


def _scenario_backup_happy(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3)
    for i in range(8):
        make_old_set(emu.hosts, fx, f"db1-old-{i}")
    assert emu.run("backup", {"array": "db1"}).status == "SUCCEEDED"


def _scenario_backup_fsfreeze(emu: Emulation) -> None:
    make_array(emu.hosts, "db1", 3)
    assert emu.run("backup", {"array": "db1", "consistency": "fsfreeze"}).status == "SUCCEEDED"


def _scenario_backup_agent_offline(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3, tag_members=True)
    emu.double.set_agent(fx.instance_id, online=False)
    assert emu.run("backup", {"array": "db1"}).status == "SUCCEEDED"


def _scenario_backup_discovery_hangs(emu: Emulation) -> None:
    make_array(emu.hosts, "db1", 3, tag_members=True)
    emu.hosts.fail_next("discover", CommandOutcome(duration_seconds=100_000))
    assert emu.run("backup", {"array": "db1"}).status == "SUCCEEDED"


def _scenario_backup_fails_while_frozen(emu: Emulation) -> None:
    make_array(emu.hosts, "db1", 3)
    emu.double.fail("ec2", "CreateSnapshots", times=5, code="InternalError")
    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze"})
    assert run.status == "FAILED"


def _scenario_backup_freeze_hangs(emu: Emulation) -> None:
    make_array(emu.hosts, "db1", 3)
    emu.hosts.fail_next("freeze", CommandOutcome(duration_seconds=100_000))
    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze"})
    assert (run.status, run.error) == ("FAILED", "CommandFailed")


def _scenario_set_age_report(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    make_old_set(emu.hosts, fx, "db1-old")
    assert emu.invoke("monitor_set_age", {}).error_type is None


def _scenario_recovery_from_alarm(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    # A lock left by a restore that no longer runs: the trigger looks its holder up first.
    table = next(iter(emu.template.of_type("AWS::DynamoDB::Table")))
    boto3.client("dynamodb").put_item(
        TableName=emu.template.physical_id(table),
        Item={
            "array": {"S": "db1"},
            "executionArn": {
                "S": emu.state_machines["restore"].replace(":stateMachine:", ":execution:")
                + ":gone"
            },
            "setId": {"S": "db1-old"},
            "leaseUntil": {"N": "9999999999"},
        },
    )
    event = alarm_event(fx.instance_id)
    started = emu.invoke("recovery_start", event)
    assert emu.invoke("recovery_start", event).error_type is None  # a duplicate
    assert emu.wait(started.result["executionArn"]).status == "SUCCEEDED"


def _scenario_recovery_attach_onto_replacement(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    standby = launch_instance("db1-standby", fx.availability_zone, tag_array=False)
    configure_recovery(
        emu, "db1", instanceId=fx.instance_id, mode="attach", replacementInstanceId=standby
    )
    emu.hosts.fail_next("assemble", CommandOutcome(status="Failed", exit_code=1))
    first = emu.invoke("recovery_start", alarm_event(fx.instance_id))
    assert emu.wait(first.result["executionArn"]).status == "FAILED"  # the tag goes back
    again = emu.invoke("recovery_start", alarm_event(fx.instance_id, at="2026-11-21T06:05:00Z"))
    assert emu.wait(again.result["executionArn"]).status == "SUCCEEDED"


def _scenario_drill(emu: Emulation) -> None:
    create_topics(emu)
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    drill_host = launch_instance("db1-drill", fx.availability_zone, tag_array=False)
    boto3.client("ec2").create_tags(
        Resources=[drill_host], Tags=[{"Key": "raidsnap:array", "Value": "db1-drill"}]
    )
    run = emu.run("drill", {"array": "db1", "targetInstanceId": drill_host})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"


def _scenario_recovery_preempts_a_drill(emu: Emulation) -> None:
    create_topics(emu)
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    drill_host = launch_instance("db1-drill", fx.availability_zone, tag_array=False)
    boto3.client("ec2").create_tags(
        Resources=[drill_host], Tags=[{"Key": "raidsnap:array", "Value": "db1-drill"}]
    )
    held = HeldStep(emu, "restore_finish")
    drill = emu.start("drill", {"array": "db1", "targetInstanceId": drill_host})
    held.wait()
    started = emu.invoke("recovery_start", alarm_event(fx.instance_id))
    held.release()
    assert emu.wait(started.result["executionArn"]).status == "SUCCEEDED"
    assert emu.wait(drill).status == "FAILED"


def _scenario_restore_fsr_replace(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "fsr"})
    assert run.status == "SUCCEEDED", run.cause


def _scenario_restore_prewarm_onto_new_instance(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    terminate(fx.instance_id)
    target = launch_instance("db1-new", fx.availability_zone, tag_array=False)
    run = emu.run(
        "restore", {"array": "db1", "targetInstanceId": target, "initialization": "prewarm"}
    )
    assert run.status == "SUCCEEDED", run.cause


def _scenario_restore_fails_and_cleans_up(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    terminate(fx.instance_id)
    target = launch_instance("db1-new", fx.availability_zone, tag_array=False)
    emu.hosts.fail_next(
        "assemble", CommandOutcome(status="Failed", stderr="mdadm: no", exit_code=1)
    )
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "fsr"})
    assert (run.status, run.error) == ("FAILED", "CommandFailed")


def _scenario_restore_volume_error_while_fsr_on(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    set_id = backed_up(emu.hosts, emu.run, fx)
    snapshot = next(
        s["SnapshotId"]
        for s in sets_of("db1")[set_id]
        if tags_of(s)["raidsnap:member-index"] == "0"
    )
    emu.double.fail_volumes(str(snapshot))
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "fsr"})
    assert (run.status, run.error) == ("FAILED", "VolumeFailed")


def _scenario_restore_fsr_stuck_falls_back(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    emu.double.stick_fsr("enabling")
    run = emu.run(
        "restore",
        {"array": "db1", "mode": "replace", "initialization": "fsr", "fsrTimeoutSeconds": 300},
    )
    assert run.status == "SUCCEEDED", run.cause


def _scenario_restore_stopped_by_hand(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    held = HeldStep(emu, "restore_check_volumes")
    arn = emu.start("restore", {"array": "db1", "mode": "replace", "initialization": "fsr"})
    held.wait()
    boto3.client("stepfunctions").stop_execution(executionArn=arn)
    held.release()
    emu.wait(arn)
    emu.clock.advance(60)
    desc = boto3.client("stepfunctions").describe_execution(executionArn=arn)
    event = {
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "detail": {"executionArn": arn, "status": "ABORTED", "input": desc["input"]},
    }
    done = emu.invoke("restore_abandoned", event)
    assert done.error_type is None, done.error_message
    assert done.result["deletedVolumeIds"] and done.result["fsrDisabled"]


SCENARIOS: list[Callable[[Emulation], None]] = [
    _scenario_restore_stopped_by_hand,
    _scenario_restore_volume_error_while_fsr_on,
    _scenario_restore_fsr_stuck_falls_back,
    _scenario_restore_fsr_replace,
    _scenario_restore_prewarm_onto_new_instance,
    _scenario_restore_fails_and_cleans_up,
    _scenario_set_age_report,
    _scenario_backup_freeze_hangs,
    _scenario_backup_happy,
    _scenario_backup_fsfreeze,
    _scenario_backup_agent_offline,
    _scenario_backup_discovery_hangs,
    _scenario_backup_fails_while_frozen,
    _scenario_recovery_from_alarm,
    _scenario_drill,
    _scenario_recovery_preempts_a_drill,
    _scenario_recovery_attach_onto_replacement,
]


def _allowed(template: Template) -> dict[str, tuple[str, set[str]]]:
    """Function logical id -> (handler module, actions its role allows)."""
    policies = template.of_type("AWS::IAM::Policy").values()
    out = {}
    for logical_id, fn in template.of_type("AWS::Lambda::Function").items():
        role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
        actions: set[str] = set()
        for policy in policies:
            if {"Ref": role} not in policy["Properties"]["Roles"]:
                continue
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                if statement["Effect"] != "Allow":
                    continue
                raw = statement["Action"]
                actions |= {a for a in ([raw] if isinstance(raw, str) else raw)}
        module = fn["Properties"]["Handler"].rsplit(".", 2)[-2]
        out[logical_id] = (module, {a for a in actions if not a.startswith(PLATFORM)})
    return out


@pytest.fixture(scope="module")
def observed(template: Path) -> dict[str, set[str]]:
    calls: dict[str, set[str]] = defaultdict(set)
    for scenario in SCENARIOS:
        with Emulation(template) as emu:
            scenario(emu)
            for call in emu.double.calls:
                if call.actor:
                    prefix = IAM_PREFIX.get(call.service, call.service)
                    calls[call.actor].add(f"{prefix}:{call.operation}")
    return calls


def _functions(template_path: Path) -> list[Any]:
    allowed = _allowed(Template(template_path))
    return [pytest.param(fid, id=module) for fid, (module, _) in sorted(allowed.items())]


@pytest.fixture(scope="module")
def allowed(template: Path) -> dict[str, tuple[str, set[str]]]:
    return _allowed(Template(template))


def test_every_function_is_covered_by_a_scenario(
    allowed: dict[str, tuple[str, set[str]]], observed: dict[str, set[str]]
) -> None:
    silent = sorted(module for fid, (module, _) in allowed.items() if fid not in observed)
    assert silent == [], f"no scenario runs {silent}: add one so its permissions are checked"


def test_every_call_a_function_makes_is_allowed_by_its_role(
    allowed: dict[str, tuple[str, set[str]]], observed: dict[str, set[str]]
) -> None:
    denied = {
        module: sorted(observed.get(fid, set()) - actions)
        for fid, (module, actions) in allowed.items()
        if observed.get(fid, set()) - actions
    }
    assert denied == {}


def test_every_action_a_role_allows_is_one_its_function_calls(
    allowed: dict[str, tuple[str, set[str]]], observed: dict[str, set[str]]
) -> None:
    unused = {}
    for fid, (module, actions) in allowed.items():
        delegated = {a for a in actions if a.startswith(DELEGATED)}
        extra = actions - observed.get(fid, set()) - set(NOT_EXERCISED.get(module, {})) - delegated
        if extra:
            unused[module] = sorted(extra)
    assert unused == {}


def test_every_acknowledged_gap_is_still_a_gap(
    allowed: dict[str, tuple[str, set[str]]], observed: dict[str, set[str]]
) -> None:
    by_module = {module: (fid, actions) for fid, (module, actions) in allowed.items()}
    stale = []
    for module, gaps in NOT_EXERCISED.items():
        fid, actions = by_module[module]
        stale += [
            f"{module}:{a}" for a in gaps if a not in actions or a in observed.get(fid, set())
        ]
    assert stale == []


def test_no_function_calls_kms_itself(observed: dict[str, set[str]]) -> None:
    assert sorted(a for calls in observed.values() for a in calls if a.startswith(DELEGATED)) == []
