"""Commands reach the emulated instance as the SSM agent runs them: the host model sees only the
SSM_<Name> variables the deployed document makes the agent export. A document that declares
interpolationType where the agent does not read it, or an agent too old to export, gets what the
real scripts answer; the workflows must say so instead of acting on it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.ssm_agent import ENV_VAR_MIN_AGENT_VERSION
from raidsnap_emulation.world import (
    backed_up,
    launch_instance,
    make_array,
    name_in_config,
    sets_of,
    terminate,
)


def ec2_changes(emu: Emulation, since: int) -> list[str]:
    return [
        c.operation
        for c in emu.double.calls[since:]
        if c.service == "ec2"
        and c.applied
        and c.operation.startswith(("Create", "Delete", "Attach", "Detach", "Enable", "Modify"))
    ]


def misplaced_interpolation(template: dict[str, Any]) -> dict[str, Any]:
    """The documents as they were first written: ENV_VAR under each step's inputs (where the
    agent ignores it) instead of on each parameter."""
    out = json.loads(json.dumps(template))
    for res in out["Resources"].values():
        if res["Type"] != "AWS::SSM::Document":
            continue
        content = res["Properties"]["Content"]
        for spec in content["parameters"].values():
            spec.pop("interpolationType", None)
        for step in content["mainSteps"]:
            step["inputs"]["interpolationType"] = "ENV_VAR"
    return out


@pytest.fixture
def old_documents(template: Path, tmp_path: Path) -> Iterator[Emulation]:
    path = tmp_path / "raidsnap.template.json"
    path.write_text(json.dumps(misplaced_interpolation(json.loads(template.read_text()))))
    with Emulation(path) as emulation:
        yield emulation


def test_restore_with_misplaced_interpolation_fails_at_assemble_as_the_script_does(
    old_documents: Emulation,
) -> None:
    emu = old_documents
    fx = make_array(emu.hosts, "db1", 3, tag_members=True)
    set_id = backed_up(emu.hosts, emu.run, fx)
    terminate(fx.instance_id)
    target = launch_instance("db1-new", fx.availability_zone, tag_array=False)
    name_in_config(emu, "db1", target)
    # (without discovery the set records no md UUID: the operator gives it)
    restore = {"array": "db1", "setId": set_id, "targetInstanceId": target, "mdUuid": fx.md_uuid}
    run = emu.run("restore", restore)
    assert (run.status, run.error) == ("FAILED", "CommandFailed"), run.cause
    assert "InvalidInput: VolumeIds has an invalid value" in str(run.cause)
    assert "Assemble" in run.states_entered
    # What it created and attached is left attached, and the cause says so: the clean-up
    # detaches a volume only once the instance confirms no md device or mount uses it, and
    # release, run from the same old documents, cannot confirm anything.
    live = boto3.client("ec2").describe_volumes(
        Filters=[{"Name": "tag-key", "Values": ["raidsnap:restore-execution"]}]
    )["Volumes"]
    left = sorted(v["VolumeId"] for v in live if v["State"] not in ("deleting", "deleted"))
    assert len(left) == 3
    assert "cleanup: left volumes" in str(run.cause)
    assert all(v in str(run.cause) for v in left)


def test_fsfreeze_backup_with_misplaced_interpolation_fails_at_freeze(
    old_documents: Emulation,
) -> None:
    emu = old_documents
    make_array(emu.hosts, "db1", 3, tag_members=True)
    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze"})
    # discovery refused (ArrayName), so members came from tags and the mount point is unknown;
    # the set is crash-consistent and the output says why
    assert run.status == "SUCCEEDED", run.cause
    assert run.output["discovery"] == "tags"
    assert any("ArrayName has an invalid value" in n for n in run.output["notes"]), run.output


def test_freeze_document_with_misplaced_interpolation_is_refused_by_the_script(
    old_documents: Emulation,
) -> None:
    """Sent directly (as the backup's Freeze step sends it), the freeze script gets no
    MountPoint and refuses: no filesystem is frozen."""
    emu = old_documents
    fx = make_array(emu.hosts, "db1", 3)
    ssm = boto3.client("ssm")
    sent = ssm.send_command(
        DocumentName=emu.document_names["freeze"],
        InstanceIds=[fx.instance_id],
        Parameters={"MountPoint": ["/data"], "MaxFreezeSeconds": ["30"]},
    )["Command"]
    emu.clock.advance(5)
    inv = ssm.get_command_invocation(CommandId=sent["CommandId"], InstanceId=fx.instance_id)
    assert (inv["Status"], inv["ResponseCode"]) == ("Failed", 2)
    assert json.loads(inv["StandardOutputContent"])["error"] == "InvalidInput"
    assert "MountPoint has an invalid value" in inv["StandardErrorContent"]
    assert emu.hosts.state(fx.instance_id).frozen == set()


def test_restore_refuses_a_target_whose_agent_is_too_old(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3)
    set_id = backed_up(emu.hosts, emu.run, fx)
    emu.double.set_agent(fx.instance_id, online=True, version="3.3.1142.0")
    mark = len(emu.double.calls)
    run = emu.run("restore", {"array": "db1", "setId": set_id, "mode": "replace"})
    assert (run.status, run.error) == ("FAILED", "InstanceNotReady")
    assert "version 3.3.1142.0" in str(run.cause)
    assert ENV_VAR_MIN_AGENT_VERSION in str(run.cause) and "Nothing was changed" in str(run.cause)
    assert ec2_changes(emu, mark) == []
    assert not [c for c in emu.double.calls[mark:] if c.operation == "SendCommand"]


def test_backup_on_a_too_old_agent_uses_tags_and_does_not_freeze(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3, tag_members=True)
    emu.double.set_agent(fx.instance_id, online=True, version="3.3.987.0")
    mark = len(emu.double.calls)
    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze"})
    assert run.status == "SUCCEEDED", run.cause
    assert run.output["discovery"] == "tags"
    notes = " ".join(run.output["notes"])
    assert "version 3.3.987.0" in notes and "crash-consistent" in notes
    assert not [c for c in emu.double.calls[mark:] if c.operation == "SendCommand"]
    snaps = sets_of("db1")[run.output["setId"]]
    assert sorted(s["VolumeId"] for s in snaps) == sorted(fx.member_ids)
    consistency = {
        t["Value"] for s in snaps for t in s["Tags"] if t["Key"] == "raidsnap:consistency"
    }
    assert consistency == {"crash"}


def test_the_agent_reports_a_current_version_by_default(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    (info,) = boto3.client("ssm").describe_instance_information(
        Filters=[{"Key": "InstanceIds", "Values": [fx.instance_id]}]
    )["InstanceInformationList"]
    version = tuple(int(p) for p in info["AgentVersion"].split("."))
    assert version >= tuple(int(p) for p in ENV_VAR_MIN_AGENT_VERSION.split("."))
