"""Each role allows exactly what its function or state machine does, on exactly the resources
and under exactly the conditions it does it.

The scenarios below drive every path of the workflows on the emulation, where every call is
authorized as AWS would authorize it (raidsnap_emulation.iam): the synthesized policies, the
resource ARNs the action authorizes, the request context of each. For every function and state
machine of the synthesized template (with and without the example config):
- sufficient: every request it made was allowed (a denied one fails its workflow);
- minimal in actions: every action its role allows was called in some scenario, or is listed in
  NOT_EXERCISED with the reason the scenarios cannot reach it;
- minimal in conditions: every condition of every grant was needed by some allowed request, and
  the same request with that condition made false is denied (raidsnap_emulation.iam.counter).
  Removing or mistyping any condition key makes one of these checks fail (proven below on the
  recorded requests, and once on a real workflow run).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from faults import crash
from test_copies import configure_copy_key
from test_stack_deletion import Responses, serving
from test_stack_deletion import request as stack_request
from test_sweeper_user_arrays import fail_look_at_assemble
from test_two_arrays import with_logs

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.double.base import AwsError
from raidsnap_emulation.harness import (
    BACKUP_ACCOUNT_CONFIG,
    COPIES_CONFIG,
    COPIES_LOCKED_DESTINATION_CONFIG,
    EXAMPLE_CONFIG,
    Emulation,
    Execution,
    Template,
    synthesize,
)
from raidsnap_emulation.iam import counter
from raidsnap_emulation.iam.evaluate import Decision, PolicySet, StatementRef
from raidsnap_emulation.template import STACK_ID
from raidsnap_emulation.world import (
    SLOW_EBS_INSTANCE_TYPE,
    HeldStep,
    alarm_event,
    backed_up,
    configure_fast_restore,
    configure_recovery,
    create_topics,
    instance_state_event,
    launch_event,
    launch_instance,
    lock_table,
    make_array,
    make_old_set,
    name_in_config,
    sets_of,
    tags_of,
    terminate,
)

IAM_PREFIX = {"stepfunctions": "states", "service-quotas": "servicequotas"}
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
}


def _scenario_backup_happy(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3)
    for i in range(8):
        make_old_set(emu.hosts, fx, f"db1-old-{i}")
    assert emu.run("backup", {"array": "db1"}).status == "SUCCEEDED"


def _scenario_backup_follows_the_array_to_a_configured_instance(emu: Emulation) -> None:
    old = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, old)
    terminate(old.instance_id)
    new = make_array(emu.hosts, "db1", 2)
    name_in_config(emu, "db1", new.instance_id)
    emu.clock.advance(60)
    run = emu.run("backup", {"array": "db1"})
    assert run.status == "SUCCEEDED", run.cause


def _scenario_backup_fsfreeze(emu: Emulation) -> None:
    make_array(emu.hosts, "db1", 3)
    assert emu.run("backup", {"array": "db1", "consistency": "fsfreeze"}).status == "SUCCEEDED"


def _scenario_backup_agent_offline(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3, tag_members=True)
    emu.double.set_agent(fx.instance_id, online=False)
    assert emu.run("backup", {"array": "db1"}).status == "SUCCEEDED"


def _scenario_backup_discovery_hangs(emu: Emulation) -> None:
    make_array(emu.hosts, "db1", 3, tag_members=True)
    emu.hosts.fail_next("discover", CommandOutcome(duration_seconds=100_000, unresponsive=True))
    assert emu.run("backup", {"array": "db1"}).status == "SUCCEEDED"


def _scenario_backup_snapshot_in_error(emu: Emulation) -> None:
    # EBS's event says a snapshot is in error: the check function fails the waiting Task.
    fx = make_array(emu.hosts, "db1", 3)
    emu.double.fail_snapshots(fx.member_ids[0])
    run = emu.run("backup", {"array": "db1"})
    assert (run.status, run.error) == ("FAILED", "SnapshotFailed")


def _scenario_backup_fails_while_frozen(emu: Emulation) -> None:
    make_array(emu.hosts, "db1", 3)
    emu.double.fail("ec2", "CreateSnapshots", times=5, code="InternalError")
    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze"})
    assert run.status == "FAILED"
    # The failed run reaches the operators through the topic (as EventBridge), and its end is
    # priced for its array (BackupCost).
    ended = emu.services.execution_event(run.arn)
    assert sorted(d.target.split(":")[2] for d in ended) == ["lambda", "sns"]
    assert all(d.delivered for d in ended)
    assert all(d.result is None or d.result.error_type is None for d in ended)


def _scenario_backup_together_fails_while_frozen(emu: Emulation) -> None:
    # The failure function thaws /data, asks how that thaw went (GetCommandInvocation), then
    # sends the thaw that runs logs' post hook.
    fx = make_array(emu.hosts, "db1", 3)
    with_logs(emu, fx)
    hooks = {
        "logs": {"preSnapshot": "/usr/local/sbin/h --hold", "postSnapshot": "/usr/local/sbin/h"}
    }
    for fn in emu.router.functions.values():
        if "HOOKS_BY_ARRAY" in fn.environment:
            fn.environment["HOOKS_BY_ARRAY"] = json.dumps(hooks)
    emu.double.fail("ec2", "CreateSnapshots", times=5, code="UnauthorizedOperation")
    run = emu.run("backup", {"array": "db1", "takeWith": ["logs"], "consistency": "fsfreeze"})
    assert run.status == "FAILED"
    assert emu.hosts.state(fx.instance_id).frozen == set()


def _scenario_backup_freeze_hangs(emu: Emulation) -> None:
    make_array(emu.hosts, "db1", 3)
    emu.hosts.fail_next("freeze", CommandOutcome(duration_seconds=100_000, unresponsive=True))
    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze"})
    assert (run.status, run.error) == ("FAILED", "CommandFailed")


def _scenario_backup_post_hook_fails_in_thaw(emu: Emulation) -> None:
    # The failure function lowers the set's consistency label (CreateTags on its snapshots).
    make_array(emu.hosts, "db1", 3)
    said = {"ok": False, "error": "HookFailed", "message": "/data is thawed, but the hook failed"}
    emu.hosts.fail_next(
        "thaw", CommandOutcome(status="Failed", stdout=json.dumps(said), exit_code=1)
    )
    hooks = {
        "preSnapshot": "builtin:postgresql-backup",
        "postSnapshot": "builtin:postgresql-backup",
    }
    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze", "hooks": hooks})
    assert (run.status, run.error) == ("FAILED", "HookFailed")


def _scenario_backup_and_restore_exclude_each_other(emu: Emulation) -> None:
    # A backup while a restore holds the lock gives its own hold back and ends; a restore while
    # a backup holds the array is refused under its lock.
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    held = HeldStep(emu, "restore_check_volumes")
    restore = emu.start("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    held.wait()
    assert emu.run("backup", {"array": "db1"}).error == "RestoreInProgress"
    held.release()
    assert emu.wait(restore).status == "SUCCEEDED"
    snapshot = HeldStep(emu, "backup_snapshot")
    backup = emu.start("backup", {"array": "db1"})
    snapshot.wait()
    refused = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert refused.error == "BackupInProgress", refused.cause
    snapshot.release()
    assert emu.wait(backup).status == "SUCCEEDED"


def _scenario_set_age_report(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    make_old_set(emu.hosts, fx, "db1-old")
    assert emu.invoke("monitor_set_age", {}).error_type is None


def _restores_end(emu: Emulation) -> None:
    """Every restore runs to its end (a recovery ends as its array is mounted, before its
    restore does), and Step Functions reports each end to the stack's rules."""
    sfn = boto3.client("stepfunctions")
    for execution in sfn.list_executions(stateMachineArn=emu.state_machines["restore"])[
        "executions"
    ]:
        emu.wait(execution["executionArn"])
        deliveries = emu.services.execution_event(execution["executionArn"])
        assert all(d.delivered for d in deliveries), deliveries


def _scenario_recovery_from_alarm(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    # A lock left by a restore that no longer runs: the trigger looks its holder up first.
    boto3.client("dynamodb").put_item(
        TableName=lock_table(),
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
    emu.double.impair_volume(fx.member_ids[1])  # evidence: a member fails its status check
    started = emu.invoke("recovery_start", event)
    assert emu.invoke("recovery_start", event).error_type is None  # a duplicate
    assert emu.wait(started.result["executionArn"]).status == "SUCCEEDED"
    # Its restore's end reaches the rule that tells a waiting recovery (none waits any more).
    _restores_end(emu)


def _scenario_recovery_whose_restore_is_stopped(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    emu.double.impair_volume(fx.member_ids[1])  # evidence: a member fails its status check
    held = HeldStep(emu, "restore_check_volumes")
    started = emu.invoke("recovery_start", alarm_event(fx.instance_id))
    held.wait()
    sfn = boto3.client("stepfunctions")
    (restore,) = sfn.list_executions(stateMachineArn=emu.state_machines["restore"])["executions"]
    sfn.stop_execution(executionArn=restore["executionArn"])
    held.release()
    # The stopped restore's end tells the recovery waiting on it, which fails.
    _restores_end(emu)
    assert emu.wait(started.result["executionArn"]).status == "FAILED"


def _scenario_recovery_told_by_the_end_of_its_restore(emu: Emulation) -> None:
    # The restore's own report of its mounted array is refused once: its end tells the recovery.
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    emu.double.impair_volume(fx.member_ids[1])  # evidence: a member fails its status check
    emu.double.fail("stepfunctions", "SendTaskSuccess", times=1, code="AccessDeniedException")
    started = emu.invoke("recovery_start", alarm_event(fx.instance_id))
    sfn = boto3.client("stepfunctions")
    while not sfn.list_executions(stateMachineArn=emu.state_machines["restore"])["executions"]:
        time.sleep(0.01)
    _restores_end(emu)
    assert emu.wait(started.result["executionArn"]).status == "SUCCEEDED"


def _scenario_recovery_attach_onto_replacement(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    standby = launch_instance("db1-standby", fx.availability_zone, tag_array=False)
    configure_recovery(
        emu, "db1", instanceId=fx.instance_id, mode="attach", replacementInstanceId=standby
    )
    emu.hosts.fail_next("assemble", CommandOutcome(status="Failed", exit_code=1))
    emu.double.impair_volume(fx.member_ids[1])  # evidence: a member fails its status check
    first = emu.invoke("recovery_start", alarm_event(fx.instance_id))
    assert emu.wait(first.result["executionArn"]).status == "FAILED"  # the tag goes back
    again = emu.invoke("recovery_start", alarm_event(fx.instance_id, at="2026-11-21T06:05:00Z"))
    assert emu.wait(again.result["executionArn"]).status == "SUCCEEDED"
    _restores_end(emu)


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
    _restores_end(emu)


def _scenario_failed_replace_puts_the_array_back(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    crash(emu, "restore_detach_old", after=1)  # the old members are tagged, then it crashes
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert run.status == "FAILED" and "put back" in (run.cause or ""), run.cause


def _scenario_restore_fsr_replace(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3, instance_type=SLOW_EBS_INSTANCE_TYPE)
    backed_up(emu.hosts, emu.run, fx)
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "fsr"})
    assert run.status == "SUCCEEDED", run.cause


def _scenario_restore_auto_enables_fsr_where_it_wins(emu: Emulation) -> None:
    # 2 x 128 GiB on 56 MB/s of EBS bandwidth, at most 100 MiB/s of provisioned rate: FSR
    # enabled now (~16 min) beats both, so Prepare asks the Region's FSR quota.
    fx = make_array(emu.hosts, "db1", 2, size_gib=128, instance_type=SLOW_EBS_INSTANCE_TYPE)
    backed_up(emu.hosts, emu.run, fx)
    run = emu.run(
        "restore",
        {"array": "db1", "mode": "replace", "initialization": "auto", "initializationRate": 100},
    )
    assert run.status == "SUCCEEDED", run.cause
    assert run.output["initialization"] == "fsr", run.output["notes"]


def _scenario_restore_prewarm_onto_new_instance(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    terminate(fx.instance_id)
    target = launch_instance("db1-new", fx.availability_zone, tag_array=False)
    name_in_config(emu, "db1", target)
    run = emu.run(
        "restore", {"array": "db1", "targetInstanceId": target, "initialization": "prewarm"}
    )
    assert run.status == "SUCCEEDED", run.cause


def _scenario_restore_fails_and_cleans_up(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2, instance_type=SLOW_EBS_INSTANCE_TYPE)
    backed_up(emu.hosts, emu.run, fx)
    terminate(fx.instance_id)
    target = launch_instance("db1-new", fx.availability_zone, tag_array=False)
    name_in_config(emu, "db1", target)
    emu.hosts.fail_next(
        "assemble", CommandOutcome(status="Failed", stderr="mdadm: no", exit_code=1)
    )
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "fsr"})
    assert (run.status, run.error) == ("FAILED", "CommandFailed")


def _scenario_restore_volume_error_while_fsr_on(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2, instance_type=SLOW_EBS_INSTANCE_TYPE)
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
    fx = make_array(emu.hosts, "db1", 2, instance_type=SLOW_EBS_INSTANCE_TYPE)
    backed_up(emu.hosts, emu.run, fx)
    emu.double.stick_fsr("enabling")
    run = emu.run(
        "restore",
        # More than FSR needs for these members at EC2's pace (~9 min): it is enabled, then
        # given up at the limit and disabled by restore_fsr.
        {"array": "db1", "mode": "replace", "initialization": "fsr", "fsrTimeoutSeconds": 600},
    )
    assert run.status == "SUCCEEDED", run.cause


def _scenario_restore_stopped_by_hand(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2, instance_type=SLOW_EBS_INSTANCE_TYPE)
    backed_up(emu.hosts, emu.run, fx)
    held = HeldStep(emu, "restore_check_volumes")
    arn = emu.start("restore", {"array": "db1", "mode": "replace", "initialization": "fsr"})
    held.wait()
    boto3.client("stepfunctions").stop_execution(executionArn=arn)
    held.release()
    emu.wait(arn)
    emu.clock.advance(60)
    # Step Functions reports the abort; the stack's rules clean up and notify the operators.
    deliveries = emu.services.execution_event(arn)
    assert deliveries and all(d.delivered for d in deliveries), deliveries
    (done,) = [
        d.result
        for d in deliveries
        if d.result is not None and d.result.module == "restore_abandoned"
    ]
    assert done.error_type is None, done.error_message
    assert done.result["deletedVolumeIds"] and done.result["fsrDisabled"]


def _scenario_restore_stopped_after_tagging_a_new_target(emu: Emulation) -> None:
    # The stop cleanup reads the run's history, and takes off the tag the run put on its new
    # target (it never reached its Assemble step).
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    terminate(fx.instance_id)
    target = launch_instance("db1-new", fx.availability_zone, tag_array=False)
    name_in_config(emu, "db1", target)
    held = HeldStep(emu, "restore_attach", nth=2)
    arn = emu.start(
        "restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"}
    )
    held.wait()
    boto3.client("stepfunctions").stop_execution(executionArn=arn)
    held.release()
    emu.wait(arn)
    deliveries = emu.services.execution_event(arn)
    assert deliveries and all(d.delivered for d in deliveries), deliveries
    (done,) = [
        d.result
        for d in deliveries
        if d.result is not None and d.result.module == "restore_abandoned"
    ]
    assert done.error_type is None, done.error_message
    assert done.result["untagged"] == target


def _scenario_restore_prewarm_cannot_be_followed(emu: Emulation) -> None:
    # Every look at the prewarm fails: the last step looks once more, to say how far it got.
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    router = emu.router
    assert router is not None

    def invoke(params: dict[str, Any]) -> Any:
        event = json.loads(params.get("Payload") or b"{}")
        if str(event.get("command", {}).get("document", "")).endswith("-prewarm"):
            emu.double.fail("ssm", "GetCommandInvocation", times=1, code="InternalServerError")
        return router(params)

    emu.double.route("lambda", "Invoke", invoke)
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "prewarm"})
    assert run.status == "SUCCEEDED", run.cause
    # the last look finds the prewarm done, or (32 GiB members) still reading: either way the
    # run says how far it got
    assert run.output["prewarm"]["status"] in ("success", "running")


def _scenario_restore_kept_after_assembly_records_its_identity(emu: Emulation) -> None:
    # The look at the assemble fails after the array was assembled and mounted: the failure
    # path keeps it (the user's) and tags its volumes with the md UUID it got.
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    fail_look_at_assemble(emu)
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert run.status == "FAILED"
    md = emu.hosts.state(fx.instance_id).arrays["/dev/md0"]
    tagged = boto3.client("ec2").describe_volumes(VolumeIds=md.members)["Volumes"]
    assert {t["Value"] for v in tagged for t in v["Tags"] if t["Key"] == "raidsnap:md-uuid"} == {
        md.md_uuid
    }


def _scenario_replace_of_a_further_array_moves_its_instance_tag(emu: Emulation) -> None:
    # logs, named on the instance by md UUID, is replaced: Finish points its tag at the new one.
    fx = make_array(emu.hosts, "db1", 2, unrelated=0)
    with_logs(emu, fx)
    assert emu.run("backup", {"array": "logs"}).status == "SUCCEEDED"
    run = emu.run("restore", {"array": "logs", "mode": "replace", "initialization": "none"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert _instance_tag(fx.instance_id, "raidsnap:array:logs") == run.output["newMdUuid"]


def _scenario_kept_further_array_moves_its_instance_tag(emu: Emulation) -> None:
    # The look at logs' assemble fails once it is mounted: the failure path keeps it and points
    # the instance's tag at its new md UUID.
    fx = make_array(emu.hosts, "db1", 2, unrelated=0)
    _, old_uuid = with_logs(emu, fx)
    assert emu.run("backup", {"array": "logs"}).status == "SUCCEEDED"
    fail_look_at_assemble(emu)
    run = emu.run("restore", {"array": "logs", "mode": "replace", "initialization": "none"})
    assert run.status == "FAILED"
    md = emu.hosts.state(fx.instance_id).arrays["/dev/md1"]
    assert md.md_uuid != old_uuid
    assert _instance_tag(fx.instance_id, "raidsnap:array:logs") == md.md_uuid


def _instance_tag(instance_id: str, key: str) -> str | None:
    found = boto3.client("ec2").describe_tags(
        Filters=[
            {"Name": "resource-id", "Values": [instance_id]},
            {"Name": "key", "Values": [key]},
        ]
    )["Tags"]
    return found[0]["Value"] if found else None


def _scenario_restore_of_an_encrypted_set(emu: Emulation) -> None:
    key = boto3.client("kms").create_key(Description="db1")["KeyMetadata"]["Arn"]
    fx = make_array(emu.hosts, "db1", 2, encrypted=True, kms_key_id=key)
    backed_up(emu.hosts, emu.run, fx)
    run = emu.run(
        "restore",
        {"array": "db1", "mode": "replace", "initialization": "rate", "initializationRate": 200},
    )
    assert run.status == "SUCCEEDED", run.cause


def _scenario_failed_replace_of_an_encrypted_array_attaches_its_members_again(
    emu: Emulation,
) -> None:
    key = boto3.client("kms").create_key(Description="db1")["KeyMetadata"]["Arn"]
    fx = make_array(emu.hosts, "db1", 2, encrypted=True, kms_key_id=key)
    backed_up(emu.hosts, emu.run, fx)
    crash(emu, "restore_attach")  # after the old members were detached
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert run.status == "FAILED" and "attached again" in (run.cause or ""), run.cause


def _restore_whose_cleanup_crashes(emu: Emulation) -> tuple[Execution, str]:
    """A restore with FSR whose volume ends in error and whose own cleanup then crashes: its
    lock, volumes and FSR are left behind (the run ends FailedUnexplained)."""
    fx = make_array(emu.hosts, "db1", 2, instance_type=SLOW_EBS_INSTANCE_TYPE)
    set_id = backed_up(emu.hosts, emu.run, fx)
    snapshot = str(sets_of("db1")[set_id][0]["SnapshotId"])
    emu.double.fail_volumes(snapshot)
    router = emu.router
    assert router is not None
    crash(emu, "restore_cleanup")
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "fsr"})
    assert run.status == "FAILED"
    emu.double.route("lambda", "Invoke", router)
    return run, snapshot


def _scenario_sweeper_removes_what_an_unexplained_failure_left(emu: Emulation) -> None:
    _restore_whose_cleanup_crashes(emu)
    emu.clock.advance(15 * 60)
    swept = emu.invoke("sweep", {})
    assert swept.error_type is None, swept.error_message
    assert swept.result["deletedVolumeIds"] and swept.result["fsrDisabled"], swept.result


def _scenario_next_restore_takes_over_what_an_unexplained_failure_left(emu: Emulation) -> None:
    # The next restore takes the lock of the run that ended, and the FSR it left on as its own.
    _, snapshot = _restore_whose_cleanup_crashes(emu)
    emu.double.heal_volumes(snapshot)
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "fsr"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"


def _scenario_alarms_notify(emu: Emulation) -> None:
    for alarm in emu.template.of_type("AWS::CloudWatch::Alarm"):
        for state in ("ALARM", "OK"):
            published = [
                d for d in emu.services.alarm(alarm, state) if d.target.startswith("arn:aws:sns")
            ]
            assert published and all(d.delivered for d in published), published


def _scenario_recovery_skipped_while_a_restore_runs(emu: Emulation) -> None:
    create_topics(emu)
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    held = HeldStep(emu, "restore_finish")
    by_hand = emu.start(
        "restore", {"array": "db1", "mode": "replace", "initialization": "none"}, name="by-hand"
    )
    held.wait()
    emu.double.impair_volume(fx.member_ids[0])
    skipped = emu.invoke("recovery_start", alarm_event(fx.instance_id))
    held.release()
    assert emu.wait(by_hand).status == "SUCCEEDED"
    assert skipped.error_type is None and skipped.result["started"] is False, skipped.result


def _scenario_fast_restore_policy(emu: Emulation) -> None:
    # The policy keeps FSR on db1's newest set: a backup enables it, the next one enables its own
    # and turns the first off; with the policy removed, a backup turns off what it kept and the
    # claim goes; once the policy is back, the sweeper does the same after it is removed again.
    fx = make_array(emu.hosts, "db1", 2)
    emu.double.fsr_region_limit = 10
    configure_fast_restore(emu, "db1", [fx.availability_zone], sets=1)
    for _ in range(2):
        run = emu.run("backup", {"array": "db1"})
        assert run.output["fastRestore"]["status"] == "kept", run.output
        emu.clock.advance(3600)
    # The backup's end is priced with the FSR its policy turned on (BackupCost).
    (priced,) = [d for d in emu.services.execution_event(run.arn) if "BackupCost" in d.target]
    assert priced.delivered and priced.result.error_type is None, priced.result
    # A restore there finds the pairs on, and leaves them on.
    target = launch_instance("db1-copy", fx.availability_zone)
    restore = {"array": "db1", "targetInstanceId": target, "initialization": "fsr"}
    assert emu.run("restore", restore).status == "SUCCEEDED"
    configure_fast_restore(emu, "db1", [fx.availability_zone], sets=0)
    run = emu.run("backup", {"array": "db1"})
    assert run.output["fastRestore"]["status"] == "removed", run.output
    configure_fast_restore(emu, "db1", [fx.availability_zone], sets=1)
    emu.clock.advance(3600)
    assert emu.run("backup", {"array": "db1"}).output["fastRestore"]["status"] == "kept"
    configure_fast_restore(emu, "db1", [fx.availability_zone], sets=0)
    swept = emu.invoke("sweep", {})
    assert swept.error_type is None and swept.result["keptSetsDisabled"], swept.result


def _scenario_stack_deletion_turns_off_kept_fsr(emu: Emulation) -> None:
    # The sweeper as the stack's custom resource: DescribeStacks of its own stack, then the
    # policy's FSR goes off and CloudFormation is answered at its URL.
    fx = make_array(emu.hosts, "db1", 2)
    emu.double.fsr_region_limit = 10
    configure_fast_restore(emu, "db1", [fx.availability_zone], sets=1)
    assert emu.run("backup", {"array": "db1"}).output["fastRestore"]["status"] == "kept"
    emu.double.stacks[STACK_ID] = "DELETE_IN_PROGRESS"
    responses = Responses()
    with serving(responses):
        answered = emu.invoke("sweep", stack_request("Delete", responses.url))
    assert answered.error_type is None, answered.error_message
    assert [b["Status"] for b in responses.bodies] == ["SUCCESS"], responses.bodies


def _scenario_removed_policy_while_a_restore_holds_a_kept_set(emu: Emulation) -> None:
    # The policy kept two sets and is removed while a restore holds the newest: the sweeper
    # turns the older off and rewrites the claim with the held one left (PutItem).
    fx = make_array(emu.hosts, "db1", 2)
    emu.double.fsr_region_limit = 12
    configure_fast_restore(emu, "db1", [fx.availability_zone], sets=2)
    for _ in range(2):
        assert emu.run("backup", {"array": "db1"}).output["fastRestore"]["status"] == "kept"
        emu.clock.advance(3600)
    held = HeldStep(emu, "restore_check_volumes")
    arn = emu.start("restore", {"array": "db1", "mode": "replace"})
    held.wait()
    try:
        configure_fast_restore(emu, "db1", [fx.availability_zone], sets=0)
        swept = emu.invoke("sweep", {})
        assert swept.error_type is None and len(swept.result["keptSetsDisabled"]) == 1, swept.result
        # The stack's deletion meanwhile is refused, the running runs named (ListExecutions).
        emu.double.stacks[STACK_ID] = "DELETE_IN_PROGRESS"
        responses = Responses()
        with serving(responses):
            emu.invoke("sweep", stack_request("Delete", responses.url))
        assert [b["Status"] for b in responses.bodies] == ["FAILED"], responses.bodies
        emu.double.stacks.pop(STACK_ID)
    finally:
        held.release()
    assert emu.wait(arn).status == "SUCCEEDED"


def _scenario_attach_restore_refused_onto_a_copy(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    run = emu.run(
        "restore",
        {"array": "db1", "mode": "attach", "targetInstanceId": fx.instance_id},
    )
    assert run.status == "FAILED", run.output


def _scenario_restore_of_a_set_whose_members_wait_in_the_recycle_bin(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    set_id = backed_up(emu.hosts, emu.run, fx)
    emu.double.retain_deleted_snapshots(days=7)
    member = str(sets_of("db1")[set_id][0]["SnapshotId"])
    boto3.client("ec2").delete_snapshot(SnapshotId=member)
    run = emu.run("restore", {"array": "db1", "setId": set_id, "mode": "replace"})
    assert run.error == "SnapshotsInRecycleBin", run.cause


def _scenario_retention_keeps_a_locked_set(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    for i in range(8):
        make_old_set(emu.hosts, fx, f"db1-old-{i}")
    oldest = str(sets_of("db1")["db1-old-0"][0]["SnapshotId"])
    boto3.client("ec2").lock_snapshot(SnapshotId=oldest, LockMode="governance", LockDuration=1)
    run = emu.run("backup", {"array": "db1"})
    assert [h["setId"] for h in run.output["retention"]["heldSets"]] == ["db1-old-0"]


SCENARIOS: list[Callable[[Emulation], None]] = [
    _scenario_restore_of_a_set_whose_members_wait_in_the_recycle_bin,
    _scenario_retention_keeps_a_locked_set,
    _scenario_restore_prewarm_cannot_be_followed,
    _scenario_restore_of_an_encrypted_set,
    _scenario_failed_replace_of_an_encrypted_array_attaches_its_members_again,
    _scenario_restore_kept_after_assembly_records_its_identity,
    _scenario_replace_of_a_further_array_moves_its_instance_tag,
    _scenario_kept_further_array_moves_its_instance_tag,
    _scenario_restore_stopped_by_hand,
    _scenario_restore_stopped_after_tagging_a_new_target,
    _scenario_restore_volume_error_while_fsr_on,
    _scenario_restore_fsr_stuck_falls_back,
    _scenario_restore_fsr_replace,
    _scenario_restore_auto_enables_fsr_where_it_wins,
    _scenario_failed_replace_puts_the_array_back,
    _scenario_restore_prewarm_onto_new_instance,
    _scenario_restore_fails_and_cleans_up,
    _scenario_set_age_report,
    _scenario_backup_and_restore_exclude_each_other,
    _scenario_backup_post_hook_fails_in_thaw,
    _scenario_backup_freeze_hangs,
    _scenario_backup_happy,
    _scenario_backup_follows_the_array_to_a_configured_instance,
    _scenario_backup_fsfreeze,
    _scenario_backup_agent_offline,
    _scenario_backup_discovery_hangs,
    _scenario_backup_fails_while_frozen,
    _scenario_backup_snapshot_in_error,
    _scenario_backup_together_fails_while_frozen,
    _scenario_recovery_from_alarm,
    _scenario_recovery_whose_restore_is_stopped,
    _scenario_recovery_told_by_the_end_of_its_restore,
    _scenario_drill,
    _scenario_recovery_preempts_a_drill,
    _scenario_recovery_attach_onto_replacement,
    _scenario_sweeper_removes_what_an_unexplained_failure_left,
    _scenario_next_restore_takes_over_what_an_unexplained_failure_left,
    _scenario_recovery_skipped_while_a_restore_runs,
    _scenario_attach_restore_refused_onto_a_copy,
    _scenario_fast_restore_policy,
    _scenario_stack_deletion_turns_off_kept_fsr,
    _scenario_removed_policy_while_a_restore_holds_a_kept_set,
]


def _scenario_recovery_rules_deliver(emu: Emulation) -> None:
    # The example config's recovery of db1 (replacement instance) and analytics (its group).
    events = [
        instance_state_event("i-0123456789abcdef0", "terminated"),
        launch_event("analytics", "i-0fedcba9876543210", hook="raidsnap-analytics"),
    ]
    for event in events:
        deliveries = emu.services.put_event(event)
        assert deliveries and all(d.delivered for d in deliveries), deliveries


def _scenario_launch_recovery_keeps_its_hook_alive(emu: Emulation) -> None:
    create_topics(emu)
    fx = make_array(emu.hosts, "analytics", 2, unrelated=0)
    backed_up(emu.hosts, emu.run, fx)
    emu.hosts.prewarm_mib_per_second = 10.0  # a prewarm longer than one heartbeat interval
    configure_recovery(emu, "analytics", instanceId=fx.instance_id, autoScalingGroup="analytics")
    terminate(fx.instance_id)
    new = launch_instance(
        "analytics-asg", fx.availability_zone, tag_array=False, auto_scaling_group="analytics"
    )
    token = "4c5d6e7f-1111-2222-3333-444455556666"  # noqa: S105 - a lifecycle action id
    emu.double.lifecycle_action("analytics", "raidsnap-analytics", token, new)
    started = emu.invoke(
        "recovery_start", launch_event("analytics", new, token=token, hook="raidsnap-analytics")
    )
    assert emu.wait(started.result["executionArn"]).status == "SUCCEEDED"
    _restores_end(emu)


def _scenario_launch_completed_but_its_answer_lost(emu: Emulation) -> None:
    # CompleteLifecycleAction CONTINUE went through, and the caller saw the SDK's retry find no
    # open action: the step asks Auto Scaling what became of the instance.
    create_topics(emu)
    fx = make_array(emu.hosts, "analytics", 2, unrelated=0)
    backed_up(emu.hosts, emu.run, fx)
    configure_recovery(emu, "analytics", instanceId=fx.instance_id, autoScalingGroup="analytics")
    terminate(fx.instance_id)
    new = launch_instance(
        "analytics-asg", fx.availability_zone, tag_array=False, auto_scaling_group="analytics"
    )
    token = "5d6e7f80-1111-2222-3333-444455556666"  # noqa: S105 - a lifecycle action id
    emu.double.lifecycle_action("analytics", "raidsnap-analytics", token, new)
    complete = emu.double._complete_lifecycle_action

    def lost(params: dict[str, Any]) -> Any:
        complete(params)
        raise AwsError("ValidationError", f"No active Lifecycle Action found with token {token}")

    emu.double.route("autoscaling", "CompleteLifecycleAction", lost)
    started = emu.invoke(
        "recovery_start", launch_event("analytics", new, token=token, hook="raidsnap-analytics")
    )
    assert emu.wait(started.result["executionArn"]).status == "SUCCEEDED"
    _restores_end(emu)


def _scenario_backup_locks_the_newest_sets(emu: Emulation) -> None:
    # The example config locks db1's 2 newest sets (governance, 7 days).
    fx = make_array(emu.hosts, "db1", 2)
    for _ in range(3):
        backed_up(emu.hosts, emu.run, fx)
        emu.clock.advance(4 * 3600)


# Run on the stack synthesized with the example config (alarms and its rules exist only there).
EXAMPLE_SCENARIOS: list[Callable[[Emulation], None]] = [
    _scenario_backup_locks_the_newest_sets,
    _scenario_alarms_notify,
    _scenario_launch_recovery_keeps_its_hook_alive,
    _scenario_launch_completed_but_its_answer_lost,
    # Last: the recoveries its rules start are not waited for, and would still run during a
    # later scenario (whose process environment they would change as they finish).
    _scenario_recovery_rules_deliver,
]

WEST = "us-west-2"


def _west(emu: Emulation) -> Any:
    """The stack deployed in us-west-2 (no config of its own: it keeps 7 sets per array and
    source), where db1's sets are copied."""
    return emu.deploy(WEST, template=synthesize())


def _scenario_copies_to_another_region_kept_there_and_restored_there(emu: Emulation) -> None:
    west = _west(emu)
    make_array(emu.hosts, "db1", 2)
    # Eight sets: the retention there (its own default, 7) deletes the first copy.
    for _ in range(8):
        run = emu.run("backup", {"array": "db1"})
        assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
        emu.clock.advance(3600)
    launch_instance("db1", f"{WEST}a", region=WEST)
    restore = west.run("restore", {"array": "db1"})
    assert restore.status == "SUCCEEDED", f"{restore.error}: {restore.cause}"


def _scenario_a_failed_copy_removes_the_copies_it_made(emu: Emulation) -> None:
    _west(emu)
    fx = make_array(emu.hosts, "db1", 2)
    emu.double.fail_copies(fx.member_ids[1])
    assert emu.run("backup", {"array": "db1"}).error == "CopyFailed"


def _scenario_copies_encrypted_with_a_key_there(emu: Emulation) -> None:
    west = _west(emu)
    make_array(emu.hosts, "db1", 2)
    with west.inside():
        key = west.client("kms").create_key(Description="db1 copies")["KeyMetadata"]["Arn"]
    configure_copy_key(emu, "db1", key)
    run = emu.run("backup", {"array": "db1"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"


def _scenario_copies_to_a_backup_account_restored_there(emu: Emulation) -> None:
    # db2 is copied to us-west-2 of the backup account, whose stack accepts copies from here:
    # the snapshots are shared, the copy started there as its copy-requests role, then unshared.
    vault = emu.deploy(WEST, "222233334444", template=synthesize(config=BACKUP_ACCOUNT_CONFIG))
    make_array(emu.hosts, "db2", 2)
    run = emu.run("backup", {"array": "db2"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    with vault.inside():
        launch_instance("db2", f"{WEST}a", region=WEST)
    restore = vault.run("restore", {"array": "db2"})
    assert restore.status == "SUCCEEDED", f"{restore.error}: {restore.cause}"


def _scenario_copies_locked_there(emu: Emulation) -> None:
    # The stack there has db1's lock policy (the 2 newest sets, governance) and keeps 2 sets:
    # its copy runs lock the newest copies, and its retention keeps the oldest, still locked.
    emu.deploy(WEST, template=synthesize(config=COPIES_LOCKED_DESTINATION_CONFIG))
    make_array(emu.hosts, "db1", 2)
    for _ in range(3):
        run = emu.run("backup", {"array": "db1"})
        assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
        emu.clock.advance(3600)


def _scenario_a_backup_stopped_while_copying_takes_back_its_share(emu: Emulation) -> None:
    # Stopped while its copy to the backup account runs: the rule on its end brings the event
    # to the copy step, which stops sharing the set and records the copy as no longer followed.
    vault = emu.deploy(WEST, "222233334444", template=synthesize(config=BACKUP_ACCOUNT_CONFIG))
    make_array(emu.hosts, "db2", 2)
    held = HeldStep(emu, "copy_finish")
    arn = emu.start("backup", {"array": "db2"})
    held.wait()
    boto3.client("stepfunctions").stop_execution(executionArn=arn, cause="stopped by hand")
    assert emu.wait(arn).status == "ABORTED"
    assert all(d.delivered for d in emu.services.execution_event(arn))
    held.release()
    for copy in vault.executions("copy"):
        vault.wait(copy)


# Run on the stack synthesized with config/copies.example.yaml (db1 copied to us-west-2, db2 to a
# backup account), with the stacks deployed there.
COPY_SCENARIOS: list[Callable[[Emulation], None]] = [
    _scenario_copies_to_another_region_kept_there_and_restored_there,
    _scenario_a_failed_copy_removes_the_copies_it_made,
    _scenario_copies_encrypted_with_a_key_there,
    _scenario_copies_to_a_backup_account_restored_there,
    _scenario_copies_locked_there,
    _scenario_a_backup_stopped_while_copying_takes_back_its_share,
]

# Conditioned grants no scenario can need, each with the reason.
UNEXERCISED_CONDITIONS: dict[str, str] = {
    "RaidsnapKey3EC8C3B1[1]": (
        "CloudWatch Logs encrypting the log groups with the stack key: the emulation runs no "
        "CloudWatch Logs (functions print to the test's output)"
    ),
}


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


@dataclass
class Recorded:
    """What the scenarios' runs asked of IAM, on one synthesized template deployed in one place
    (the emulation's own Region, or a stack deployed elsewhere by a scenario)."""

    template: Path
    policies: PolicySet
    decisions: list[Decision] = field(default_factory=list)
    calls: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))


def _stacks(emu: Emulation, template: Path) -> list[tuple[str, Any, tuple[str, str, str]]]:
    """(actor prefix, IAM, (template, Region, account)) of every stack the scenario ran."""
    own = ("", emu.iam, (str(template), emu.own.region, emu.own.account))
    return [own] + [
        (p.stack.prefix, p.iam, (str(p.template.path), p.region, p.account)) for p in emu.peers
    ]


def _record(template: Path, scenarios: list[Callable[[Emulation], None]]) -> list[Recorded]:
    by_place: dict[tuple[str, str, str], Recorded] = {}
    seen: set[tuple[Any, ...]] = set()
    for scenario in scenarios:
        with Emulation(template) as emu:
            scenario(emu)
            stacks = _stacks(emu, template)
            others = [prefix for prefix, _, _ in stacks if prefix]
            for prefix, iam, place in stacks:
                recorded = by_place.setdefault(place, Recorded(Path(place[0]), iam.policies))
                # Keys made in a scenario (an operator's volume key) bring their key policies.
                recorded.policies.resource.update(iam.policies.resource)
                _keep(recorded, iam.decisions, place, seen)
                for call in emu.double.calls:
                    actor = call.actor or ""
                    mine = (
                        actor.startswith(prefix) if prefix else not actor.startswith(tuple(others))
                    )
                    if actor and mine:
                        service = IAM_PREFIX.get(call.service, call.service)
                        recorded.calls[actor[len(prefix) :]].add(f"{service}:{call.operation}")
                # Actions a call is authorized as besides its own (EC2's tag-on-create
                # CreateTags); not the key use a service makes on the caller's behalf.
                for d in iam.decisions:
                    if (
                        d.allowed
                        and d.actor
                        and d.request.via is None
                        and not d.request.principal.is_service
                    ):
                        recorded.calls[d.actor].add(d.request.action)
    return list(by_place.values())


def _keep(
    recorded: Recorded, decisions: list[Decision], place: tuple[str, ...], seen: set[Any]
) -> None:
    for d in decisions:
        r = d.request
        slot = (place, r.principal, r.action, r.resource, tuple(sorted(r.context.items())))
        if (*slot, d.allowed) not in seen:
            seen.add((*slot, d.allowed))
            recorded.decisions.append(d)


@pytest.fixture(scope="module")
def recorded(template: Path) -> list[Recorded]:
    example = synthesize(config=EXAMPLE_CONFIG)
    copies = synthesize(config=COPIES_CONFIG)
    return [
        *_record(template, SCENARIOS),
        *_record(example, EXAMPLE_SCENARIOS),
        *_record(copies, COPY_SCENARIOS),
    ]


def _calls(recorded: list[Recorded]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for r in recorded:
        for actor, actions in r.calls.items():
            out[actor] |= actions
    return out


@pytest.fixture(scope="module")
def observed(recorded: list[Recorded], template: Path) -> dict[str, set[str]]:
    """The calls of the functions of the stack without a config, wherever a scenario ran it."""
    return _calls([r for r in recorded if r.template == template])


@pytest.fixture(scope="module")
def observed_anywhere(recorded: list[Recorded]) -> dict[str, set[str]]:
    """Every function's calls on any template: a function the stack without a config never runs
    (the backup's copy step, for arrays with copies) is run with the config that needs it."""
    return _calls(recorded)


def _functions(template_path: Path) -> list[Any]:
    allowed = _allowed(Template(template_path))
    return [pytest.param(fid, id=module) for fid, (module, _) in sorted(allowed.items())]


@pytest.fixture(scope="module")
def allowed(template: Path) -> dict[str, tuple[str, set[str]]]:
    return _allowed(Template(template))


def test_every_function_is_covered_by_a_scenario(
    allowed: dict[str, tuple[str, set[str]]], observed_anywhere: dict[str, set[str]]
) -> None:
    silent = sorted(module for fid, (module, _) in allowed.items() if fid not in observed_anywhere)
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


# ---------------------------------------------------------------------- resources and conditions


def test_every_request_the_scenarios_made_was_allowed(recorded: list[Recorded]) -> None:
    denied = [
        f"{d.actor}: {d.request.action} on {d.request.resource}: {d.reason}"
        for r in recorded
        for d in r.decisions
        if not d.allowed
    ]
    assert denied == []


def test_every_conditioned_grant_is_needed_by_some_request(recorded: list[Recorded]) -> None:
    # Both templates share their grants' logical ids: a grant counts as needed in either.
    acknowledged = {StatementRef(*_ref(k)): v for k, v in UNEXERCISED_CONDITIONS.items()}
    decisions = [d for r in recorded for d in r.decisions]
    silent = {
        ref for r in recorded for ref in counter.unexercised(r.policies, decisions, acknowledged)
    }
    assert sorted(silent) == [], "\n".join(sorted(silent))


def _ref(text: str) -> tuple[str, int]:
    policy, index = text.rstrip("]").split("[")
    return policy, int(index)


@pytest.fixture(scope="module")
def counters(recorded: list[Recorded]) -> list[tuple[Recorded, list[counter.Counter]]]:
    out = []
    for r in recorded:
        found, unfalsifiable = counter.counter_requests(r.policies, r.decisions)
        assert unfalsifiable == [], "conditions no request could make false"
        out.append((r, found))
    return out


def test_every_condition_restricts_the_grant(
    counters: list[tuple[Recorded, list[counter.Counter]]],
) -> None:
    # GIVEN the requests real runs made, each with one condition of the grant that allowed it
    # made false (another tag value, the tag missing, another CreateAction, one more tag key...)
    assert sum(len(c) for _, c in counters) > 50
    kinds = {(c.operator, c.key) for _, found in counters for c in found}
    assert ("StringEquals", "ec2:CreateAction") in kinds
    assert ("ForAllValues:StringEquals", "aws:TagKeys") in kinds
    assert ("ArnLike", "aws:SourceArn") in kinds
    # THEN the synthesized policies deny every one
    assert [a for r, found in counters for a in counter.allowed_counters(r.policies, found)] == []


def test_removing_or_mistyping_any_condition_key_fails_a_check(
    counters: list[tuple[Recorded, list[counter.Counter]]],
) -> None:
    # GIVEN each condition key of each grant, once removed and once with two letters swapped
    # (both templates share their grants' logical ids: a change is noticed if either notices)
    acknowledged = {StatementRef(*_ref(k)) for k in UNEXERCISED_CONDITIONS}
    noticed: dict[str, bool] = {}
    for recorded_run, found in counters:
        for what, mutated in counter.mutations(recorded_run.policies):
            if any(what.startswith(f"{ref} ") for ref in acknowledged) or noticed.get(what):
                continue
            # THEN a request a real run made is denied, or a counter-request is allowed
            problems = counter.denied_recorded(mutated, recorded_run.decisions)
            problems += counter.allowed_counters(mutated, found)
            noticed[what] = bool(problems)
    assert len(noticed) > 60
    unnoticed = sorted(what for what, seen in noticed.items() if not seen)
    assert unnoticed == [], "\n".join(unnoticed)


def test_a_mistyped_condition_key_fails_the_workflow(template: Path, tmp_path: Path) -> None:
    # GIVEN the stack with one letter swapped in a condition key of the backup's snapshot grant
    body = json.loads(template.read_text())
    policy = next(
        res["Properties"]["PolicyDocument"]
        for name, res in body["Resources"].items()
        if name.startswith("BackupBackupSnapshotRoleDefaultPolicy")
    )
    grant = next(
        s
        for s in policy["Statement"]
        if s.get("Condition", {}).get("StringLike", {}).get("aws:RequestTag/raidsnap:array")
    )
    grant["Condition"]["StringLike"] = {"aws:RequestTag/raidsnap:arary": "*"}
    mutated = tmp_path / "raidsnap.template.json"
    mutated.write_text(json.dumps(body))
    # WHEN a backup runs on it
    with Emulation(mutated) as emu:
        make_array(emu.hosts, "db1", 2)
        run = emu.run("backup", {"array": "db1"})
    # THEN AWS would deny its CreateSnapshots, and the run fails saying so
    assert run.status == "FAILED"
    assert "UnauthorizedOperation" in (run.cause or "")
    assert "ec2:CreateSnapshots" in (run.cause or "")
