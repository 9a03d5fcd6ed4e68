"""A replace releases the old array and detaches its members while EC2 creates the new volumes
(they exist, and are recorded as the run's, before the release starts), instead of after they
are available. Whatever fails in that span, the run loses nothing and leaves nothing behind:
the volumes it recorded are deleted once EC2 has made them, and an old array it released is put
back, its members attached again where they were when the run had detached them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import boto3

from raidsnap.workflows.restore.volumes import ATTACH_POLL_SECONDS, VOLUME_POLL_SECONDS
from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    ArrayFixture,
    backed_up,
    make_array,
    restored_volumes,
    sets_of,
    tags_of,
)

# What EC2 takes here to create a volume from a snapshot: longer than the release and the
# detach of the old members together, as it is for large members on AWS.
VOLUME_SECONDS = 30.0


def _replace(emu: Emulation) -> Any:
    return emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})


def _times(emu: Emulation, mark: int, operation: str, document: str = "") -> list[datetime]:
    """When the calls of ``operation`` (of that document, for SendCommand) that AWS carried out
    since ``mark`` were made, on the emulation's clock."""
    return [
        c.time
        for c in emu.double.calls[mark:]
        if c.operation == operation
        and c.applied
        and str(c.params.get("DocumentName", "")).endswith(document)
    ]


def _devices(fx: ArrayFixture) -> dict[str, str]:
    volumes = boto3.client("ec2").describe_volumes(VolumeIds=fx.member_ids)["Volumes"]
    return {
        v["VolumeId"]: a["Device"]
        for v in volumes
        for a in v["Attachments"]
        if a["InstanceId"] == fx.instance_id
    }


def _old_array_is_back(emu: Emulation, fx: ArrayFixture, devices: dict[str, str]) -> None:
    md = emu.hosts.state(fx.instance_id).arrays.get("/dev/md0")
    assert md is not None
    assert (md.members, md.md_uuid, md.mount_point) == (fx.member_ids, fx.md_uuid, "/data")
    assert _devices(fx) == devices
    for vol in boto3.client("ec2").describe_volumes(VolumeIds=fx.member_ids)["Volumes"]:
        assert "raidsnap:replaced-by" not in tags_of(vol)


def test_a_replace_releases_and_detaches_the_old_array_while_the_volumes_are_created(
    emu: Emulation,
) -> None:
    # GIVEN db1, backed up, and volumes EC2 takes 30 s to create
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    emu.double.volume_seconds = VOLUME_SECONDS
    started, mark = emu.clock.now(), len(emu.double.calls)
    # WHEN db1 is replaced in place
    run = _replace(emu)
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    # THEN the old array was released, and its members detached, after the volumes were created
    # (CreateVolume answered) and before EC2 had made them
    (created, *_) = _times(emu, mark, "CreateVolume")
    ready = (created - started).total_seconds() + VOLUME_SECONDS
    (released,) = _times(emu, mark, "SendCommand", "-release")
    detaches = _times(emu, mark, "DetachVolume")
    assert created <= released
    assert len(detaches) == len(fx.member_ids)
    assert max((t - started).total_seconds() for t in [released, *detaches]) < ready
    # AND the new volumes are attached at the first look after EC2 made them, and the array is
    # assembled right after: the release and the detach took nothing off the time to mounted
    (attached, *_) = _times(emu, mark, "AttachVolume")
    (assembled,) = _times(emu, mark, "SendCommand", "-assemble")
    assert (attached - started).total_seconds() <= ready + VOLUME_POLL_SECONDS
    attach_done = emu.double.attach_seconds + ATTACH_POLL_SECONDS
    assert (assembled - started).total_seconds() <= ready + VOLUME_POLL_SECONDS + attach_done
    assert emu.hosts.state(fx.instance_id).arrays["/dev/md0"].members == run.output["volumeIds"]


def test_a_volume_that_fails_after_the_release_puts_the_old_array_back_where_it_was(
    emu: Emulation,
) -> None:
    # GIVEN db1, backed up, whose member 0 snapshot makes volumes that end in error
    fx = make_array(emu.hosts, "db1", 3)
    set_id = backed_up(emu.hosts, emu.run, fx)
    devices = _devices(fx)
    snapshot = next(
        str(s["SnapshotId"])
        for s in sets_of("db1")[set_id]
        if tags_of(s)["raidsnap:member-index"] == "0"
    )
    emu.double.fail_volumes(snapshot)
    mark = len(emu.double.calls)
    # WHEN db1 is replaced in place
    run = _replace(emu)
    # THEN the run fails on the volume, after it had released the array and detached its members
    assert (run.status, run.error) == ("FAILED", "VolumeFailed"), run.cause
    assert _times(emu, mark, "SendCommand", "-release")
    assert len(_times(emu, mark, "DetachVolume")) >= len(fx.member_ids)
    # AND the old array is back in service: its members attached again on the devices they had,
    # assembled under their own md UUID and mounted where they were, and no longer marked replaced
    _old_array_is_back(emu, fx, devices)
    # AND nothing of the run is left: every volume it created is deleted
    assert [v["VolumeId"] for v in restored_volumes(run.arn) if v["State"] != "deleted"] == []
    cause = run.cause or ""
    assert "put back" in cause and "attached again" in cause, cause


def test_a_release_that_fails_while_the_volumes_are_created_deletes_them_once_made(
    emu: Emulation,
) -> None:
    # GIVEN db1, backed up, volumes EC2 takes 30 s to create, and a release the instance refuses
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    emu.double.volume_seconds = VOLUME_SECONDS
    emu.hosts.fail_next(
        "release",
        CommandOutcome(
            status="Failed",
            stdout='{"ok": false, "error": "FilesystemInUse", "message": "/data is busy"}',
            stderr="umount: /data: target is busy.",
            exit_code=1,
            duration_seconds=1,
        ),
    )
    started, mark = emu.clock.now(), len(emu.double.calls)
    # WHEN db1 is replaced in place
    run = _replace(emu)
    # THEN the run fails on the release, which it learned while EC2 was still creating
    assert (run.status, run.error) == ("FAILED", "CommandFailed"), run.cause
    (created, *_) = _times(emu, mark, "CreateVolume")
    ready = (created - started).total_seconds() + VOLUME_SECONDS
    failed_release = next(
        i
        for i in emu.router.invocations
        if i.module == "command_poll" and i.error_type == "CommandFailedError"
    )
    assert (failed_release.at - started).total_seconds() < ready
    # AND every volume it created is deleted (each once EC2 had made it), and only those
    (made,) = [i.result for i in emu.router.invocations if i.module == "restore_create_volumes"]
    ours = sorted(made["ids"])
    assert len(ours) == 3
    assert [v["VolumeId"] for v in restored_volumes(run.arn) if v["State"] != "deleted"] == []
    deletes = [c for c in emu.double.calls[mark:] if c.operation == "DeleteVolume" and c.applied]
    assert sorted(str(c.params["VolumeId"]) for c in deletes) == ours
    assert all((c.time - started).total_seconds() >= ready for c in deletes)
    # AND the old array was never touched: its members attached, assembled and mounted
    assert _times(emu, mark, "DetachVolume") == []
    md = emu.hosts.state(fx.instance_id).arrays["/dev/md0"]
    assert (md.members, md.mount_point) == (fx.member_ids, "/data")
