"""Restore drills, as synthesized, on the emulation: the drill workflow runs the restore nested
onto a drill instance, checks the copy, removes it, and reports."""

from __future__ import annotations

import json
import threading
from typing import Any

import boto3
import pytest
from faults import crash

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    ArrayFixture,
    HeldStep,
    backed_up,
    create_topics,
    launch_instance,
    make_array,
    restored_volumes,
    sets_of,
)


@pytest.fixture
def drill_world(emu: Emulation) -> tuple[ArrayFixture, str, str]:
    """db1 with one backup, the stack's topic, and a drill instance tagged db1-drill."""
    create_topics(emu)
    fx = make_array(emu.hosts, "db1", 3)
    set_id = backed_up(emu.hosts, emu.run, fx)
    ec2 = boto3.client("ec2")
    drill_host = launch_instance("db1-drill", fx.availability_zone, tag_array=False)
    ec2.create_tags(Resources=[drill_host], Tags=[{"Key": "raidsnap:array", "Value": "db1-drill"}])
    return fx, set_id, drill_host


def published(emu: Emulation) -> list[dict[str, Any]]:
    return [c.params for c in emu.double.calls if (c.service, c.operation) == ("sns", "Publish")]


def emitted(out: str, name: str) -> list[dict[str, Any]]:
    """EMF documents Powertools printed for this metric."""
    docs = [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]
    return [d for d in docs if name in d]


def source_calls(emu: Emulation, fx: ArrayFixture, since: int) -> list[str]:
    """Changing EC2 calls after ``since`` that name the source instance or its volumes."""
    ours = {fx.instance_id, *fx.member_ids, fx.boot_volume_id, *fx.other_volume_ids}
    return [
        f"{c.operation} {c.params}"
        for c in emu.double.mutating_calls("ec2")[since:]
        if ours & set(json.dumps(c.params, default=str).replace('"', " ").split())
    ]


def snapshots_intact(set_id: str, members: int) -> bool:
    snaps = sets_of("db1").get(set_id, [])
    return len(snaps) == members and all(s["State"] == "completed" for s in snaps)


def given_identity(emu: Emulation) -> list[str]:
    """The NewMdUuid each assemble was sent with: the copy's own md UUID."""
    return [
        c.params["Parameters"]["NewMdUuid"][0]
        for c in emu.double.calls
        if c.operation == "SendCommand" and str(c.params["DocumentName"]).endswith("-assemble")
    ]


def test_a_drill_restores_the_set_read_only_checks_it_removes_it_and_reports(
    emu: Emulation, drill_world: tuple[ArrayFixture, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    fx, set_id, drill_host = drill_world
    before = len(emu.double.mutating_calls("ec2"))
    run = emu.run("drill", {"array": "db1", "targetInstanceId": drill_host})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    out = run.output
    assert (out["setId"], out["targetInstanceId"]) == (set_id, drill_host)
    # The copy carries an md UUID of its own, never the set's
    (copy_uuid,) = given_identity(emu)
    assert copy_uuid != fx.md_uuid
    assert out["verification"] == {
        "setId": set_id,
        "mdUuid": copy_uuid,
        "filesystem": "xfs",
        "members": 3,
        "readOnly": True,
    }
    # The restore ran nested, read-only, at the drill's md device and mount point
    (restore,) = [
        e
        for e in boto3.client("stepfunctions").list_executions(
            stateMachineArn=emu.state_machines["restore"]
        )["executions"]
        if e["name"].startswith("drill-")
    ]
    assert restore["status"] == "SUCCEEDED"
    assert out["restoreExecutionArn"] == restore["executionArn"]
    assemble = [
        c.params["Parameters"]
        for c in emu.double.calls
        if c.operation == "SendCommand" and str(c.params["DocumentName"]).endswith("-assemble")
    ]
    assert assemble[-1]["ReadOnly"] == ["true"]
    assert (assemble[-1]["MdDevice"], assemble[-1]["MountPoint"]) == (
        ["/dev/md100"],
        ["/mnt/raidsnap-drill"],
    )
    # Teardown: the copy is released and every volume the drill's restore created is gone;
    # the read-only copy was never recorded for boot, so the drill instance keeps no trace
    assert emu.hosts.state(drill_host).arrays == {}
    assert assemble[-1]["Persist"] == ["false"]
    assert (emu.hosts.state(drill_host).fstab, emu.hosts.state(drill_host).mdadm_conf) == ({}, {})
    created = restored_volumes(restore["executionArn"])
    assert len(out["deletedVolumeIds"]) == 3
    assert all(v["State"] in ("deleting", "deleted") for v in created)
    live = boto3.client("ec2").describe_volumes(
        Filters=[{"Name": "tag-key", "Values": ["raidsnap:restore-execution"]}]
    )["Volumes"]
    assert [v["VolumeId"] for v in live if v["State"] not in ("deleting", "deleted")] == []
    # The source array is untouched: same md state, its volumes attached, its set intact
    md = emu.hosts.state(fx.instance_id).arrays["/dev/md0"]
    assert (md.members, md.failed, md.mount_point) == (fx.member_ids, False, "/data")
    vols = boto3.client("ec2").describe_volumes(VolumeIds=fx.member_ids)["Volumes"]
    assert all(v["Attachments"][0]["InstanceId"] == fx.instance_id for v in vols)
    assert source_calls(emu, fx, before) == []
    assert snapshots_intact(set_id, 3)
    # Reported: a metric and a notification
    (metric,) = emitted(capsys.readouterr().out, "DrillSucceeded")
    assert "Array" in metric["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0]
    assert (metric["Array"], metric["DrillSucceeded"]) == ("db1", [1.0])
    (note,) = published(emu)
    topic = next(iter(emu.template.of_type("AWS::SNS::Topic")))
    assert note["TopicArn"].endswith(":" + str(emu.template.get_att(topic, "TopicName")))
    assert note["Subject"] == "raidsnap drill of db1: passed"
    assert set_id in note["Message"]


def test_a_drill_whose_restore_fails_still_tears_down_and_reports_the_failure(
    emu: Emulation, drill_world: tuple[ArrayFixture, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    fx, set_id, drill_host = drill_world
    emu.hosts.fail_next(
        "assemble",
        CommandOutcome(
            status="Failed",
            stderr="mdadm: no devices found for /dev/md100",
            exit_code=1,
            duration_seconds=2,
        ),
    )
    run = emu.run("drill", {"array": "db1", "targetInstanceId": drill_host})
    assert (run.status, run.error) == ("FAILED", "CommandFailed")
    assert "no devices found" in str(run.cause)
    # (its failed restore removed its own volumes: nothing is attached, so nothing to release)
    assert "IsReleaseNeeded" in run.states_entered and "RemoveVolumes" in run.states_entered
    assert "WaitForRelease" not in run.states_entered
    live = boto3.client("ec2").describe_volumes(
        Filters=[{"Name": "tag-key", "Values": ["raidsnap:restore-execution"]}]
    )["Volumes"]
    assert [v["VolumeId"] for v in live if v["State"] not in ("deleting", "deleted")] == []
    assert emu.hosts.state(fx.instance_id).arrays["/dev/md0"].members == fx.member_ids
    assert snapshots_intact(set_id, 3)
    (metric,) = emitted(capsys.readouterr().out, "DrillFailed")
    assert (metric["Array"], metric["DrillFailed"]) == ("db1", [1.0])
    (note,) = published(emu)
    assert note["Subject"] == "raidsnap drill of db1: FAILED (CommandFailed)"


def test_a_drill_whose_copy_is_not_the_array_fails_after_removing_it(
    emu: Emulation, drill_world: tuple[ArrayFixture, str, str]
) -> None:
    _fx, _set_id, drill_host = drill_world
    # Discovery on the drill instance shows another array at the drill's md device
    emu.hosts.fail_next(
        "discover",
        CommandOutcome(
            stdout=json.dumps(
                {
                    "ok": True,
                    "arrayName": "db1",
                    "arrays": [
                        {
                            "device": "/dev/md100",
                            "name": "otherhost:other",
                            "uuid": "00000000:00000000:00000000:00000000",
                            "level": "raid0",
                            "chunkKib": 512,
                            "metadata": "1.2",
                            "state": "clean",
                            "raidDevices": 0,
                            "degraded": None,
                            "members": [],
                            "filesystem": {"type": "ext4", "uuid": None, "label": ""},
                            "mountPoint": "/mnt/raidsnap-drill",
                            "matchesArrayName": False,
                        }
                    ],
                }
            ),
            duration_seconds=1,
        ),
    )
    run = emu.run("drill", {"array": "db1", "targetInstanceId": drill_host})
    assert (run.status, run.error) == ("FAILED", "DrillVerificationFailed")
    assert "md UUID is 00000000" in str(run.cause)
    release = [
        c.params["Parameters"]
        for c in emu.double.calls
        if c.operation == "SendCommand" and str(c.params["DocumentName"]).endswith("-release")
    ]
    assert release == [
        {
            "MdDevice": ["/dev/md100"],
            "MountPoint": ["/mnt/raidsnap-drill"],
            "MdUuid": given_identity(emu),
        }
    ]
    live = boto3.client("ec2").describe_volumes(
        Filters=[{"Name": "tag-key", "Values": ["raidsnap:restore-execution"]}]
    )["Volumes"]
    assert [v["VolumeId"] for v in live if v["State"] not in ("deleting", "deleted")] == []


@pytest.mark.parametrize("target", ["array-instance", "untagged"])
def test_a_drill_refuses_a_target_that_is_not_a_drill_instance(
    emu: Emulation, drill_world: tuple[ArrayFixture, str, str], target: str
) -> None:
    fx, _set_id, _drill_host = drill_world
    instance = (
        fx.instance_id
        if target == "array-instance"
        else launch_instance("x", fx.availability_zone, tag_array=False)
    )
    before = len(emu.double.mutating_calls("ec2"))
    run = emu.run("drill", {"array": "db1", "targetInstanceId": instance})
    assert (run.status, run.error) == ("FAILED", "InvalidInput")
    assert str(run.cause).startswith("targetInstanceId: ")
    assert emu.double.mutating_calls("ec2")[before:] == []
    assert "Restore" not in run.states_entered


def test_a_drill_preempted_after_assembly_releases_its_copy_and_the_next_drill_passes(
    emu: Emulation, drill_world: tuple[ArrayFixture, str, str]
) -> None:
    # GIVEN a drill whose restore is stopped after it assembled and mounted the copy (a
    # recovery preempts drills)
    _fx, _, drill_host = drill_world
    held = HeldStep(emu, "restore_finish")
    drill = emu.start("drill", {"array": "db1", "targetInstanceId": drill_host})
    held.wait()
    restore_arn = next(
        e["executionArn"]
        for e in boto3.client("stepfunctions").list_executions(
            stateMachineArn=emu.state_machines["restore"]
        )["executions"]
        if e["name"].startswith("drill-")
    )
    assert "/dev/md100" in emu.hosts.state(drill_host).arrays  # assembled and mounted
    boto3.client("stepfunctions").stop_execution(
        executionArn=restore_arn, error="PreemptedByRecovery", cause="a recovery needs the lock"
    )
    held.release()
    # WHEN the drill ends
    first = emu.wait(drill)
    # THEN it failed, but released the copy on the drill instance before removing its volumes
    assert first.status == "FAILED"
    released = [
        c.params["Parameters"]
        for c in emu.double.calls
        if c.operation == "SendCommand" and str(c.params["DocumentName"]).endswith("-release")
    ]
    assert released and released[0]["MdDevice"] == ["/dev/md100"]
    assert released[0]["MdUuid"] == given_identity(emu)[:1]
    assert "/dev/md100" not in emu.hosts.state(drill_host).arrays
    assert [
        v for v in restored_volumes(restore_arn) if v["State"] not in ("deleting", "deleted")
    ] == []
    # AND the next drill on that host passes
    again = emu.run("drill", {"array": "db1", "targetInstanceId": drill_host})
    assert again.status == "SUCCEEDED", f"{again.error}: {again.cause}"


@pytest.mark.parametrize("given", ["db1", ["db1"], 7])
def test_a_drill_whose_input_is_not_an_object_fails_as_invalid_input_and_reports_it(
    emu: Emulation, drill_world: tuple[ArrayFixture, str, str], given: object
) -> None:
    before = len(emu.double.mutating_calls("ec2"))
    run = emu.run("drill", given)
    assert (run.status, run.error) == ("FAILED", "InvalidInput")
    assert run.cause == "input: the execution input must be a JSON object"
    assert emu.double.mutating_calls("ec2")[before:] == []
    (note,) = published(emu)
    assert note["Subject"] == "raidsnap drill of unknown: FAILED (InvalidInput)"


def test_a_drill_whose_teardown_fails_before_removing_anything_does_not_pass(
    emu: Emulation, drill_world: tuple[ArrayFixture, str, str]
) -> None:
    # GIVEN a drill whose restore and check succeed, but whose teardown function crashes
    _fx, _set_id, drill_host = drill_world
    crash(emu, "drill_teardown")
    # WHEN it runs
    run = emu.run("drill", {"array": "db1", "targetInstanceId": drill_host})
    # THEN it does not report a pass: the copy and its volumes are still there
    (restore,) = [
        e
        for e in boto3.client("stepfunctions").list_executions(
            stateMachineArn=emu.state_machines["restore"]
        )["executions"]
        if e["name"].startswith("drill-")
    ]
    left = [v for v in restored_volumes(restore["executionArn"]) if v["State"] == "in-use"]
    assert len(left) == 3
    assert (run.status, run.error) == ("FAILED", "DrillTeardownFailed")
    assert restore["executionArn"] in str(run.cause)
    assert "delete them by hand" in str(run.cause)
    (note,) = published(emu)
    assert note["Subject"] == "raidsnap drill of db1: FAILED (DrillTeardownFailed)"


def test_a_drill_stopped_before_its_restore_ended_releases_its_copy_by_its_identity(
    emu: Emulation, drill_world: tuple[ArrayFixture, str, str]
) -> None:
    # GIVEN a drill whose restore assembled and mounted the copy and then, during its prewarm,
    # was stopped (a recovery preempts drills): no output, its volumes never tagged
    _fx, _set_id, drill_host = drill_world
    router = emu.router
    assert router is not None
    command_fn = next(
        n for n, f in router.functions.items() if f.handler.endswith(".restore_command.handler")
    )
    reached, go_on = threading.Event(), threading.Event()

    def invoke(params: dict[str, Any]) -> Any:
        name = str(params["FunctionName"]).rsplit(":", 1)[-1]
        body = json.loads(params.get("Payload") or b"{}")
        if name == command_fn and body.get("step") == "prewarm" and not reached.is_set():
            reached.set()
            go_on.wait(120)
            raise RuntimeError("the execution was stopped")
        return router(params)

    emu.double.route("lambda", "Invoke", invoke)
    drill = emu.start(
        "drill", {"array": "db1", "targetInstanceId": drill_host, "initialization": "prewarm"}
    )
    assert reached.wait(60), "the restore never reached its prewarm"
    sfn = boto3.client("stepfunctions")
    restore_arn = next(
        e["executionArn"]
        for e in sfn.list_executions(stateMachineArn=emu.state_machines["restore"])["executions"]
        if e["name"].startswith("drill-")
    )
    assert "/dev/md100" in emu.hosts.state(drill_host).arrays
    sfn.stop_execution(executionArn=restore_arn, error="Preempted", cause="a recovery")
    go_on.set()
    emu.wait(drill)
    # THEN its teardown releases the copy naming the identity the drill gave it, so that release
    # refuses whatever else the md device might hold
    released = [
        c.params["Parameters"]
        for c in emu.double.calls
        if c.operation == "SendCommand" and str(c.params["DocumentName"]).endswith("-release")
    ]
    assert released and released[0]["MdDevice"] == ["/dev/md100"]
    assert released[0]["MdUuid"] == given_identity(emu)[:1] != [""]
    assert "/dev/md100" not in emu.hosts.state(drill_host).arrays
