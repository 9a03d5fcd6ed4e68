"""Attach mode assembles a copy on an instance that has no other copy of the array: mdadm refuses a
second active array of one md UUID, and with old members still attached the next boot may build
the array from old and new members. The restore refuses such a target before any change, and
the assemble document refuses again on the instance, by the superblocks themselves."""

from __future__ import annotations

import boto3

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    backed_up,
    launch_instance,
    make_array,
    restored_volumes,
    sets_of,
    tags_of,
)

READS = ("Describe", "Get", "List")


def changes(emu: Emulation, since: int) -> list[str]:
    return [
        f"{c.service}:{c.operation}"
        for c in emu.double.calls[since:]
        if c.applied and c.service in ("ec2", "ssm") and not c.operation.startswith(READS)
    ]


def test_a_read_only_look_next_to_the_live_array_on_its_instance(emu: Emulation) -> None:
    # GIVEN db1, live and mounted on its instance, with last night's set
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    look = {
        "array": "db1",
        "mountPoint": "/mnt/db1-yesterday",
        "mdDevice": "/dev/md10",
        "readOnly": True,
        "initialization": "none",
    }
    # WHEN a read-only copy is asked for next to it, on the same instance
    run = emu.run("restore", look)
    # THEN the copy is mounted read-only next to the live array, under an md UUID of its own,
    # its volumes marked as a copy
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    state = emu.hosts.state(fx.instance_id)
    copy = state.arrays["/dev/md10"]
    assert (copy.members, copy.mount_point, copy.read_only) == (
        run.output["volumeIds"],
        "/mnt/db1-yesterday",
        True,
    )
    assert copy.md_uuid == run.output["newMdUuid"] != fx.md_uuid
    assert all(tags_of(v)["raidsnap:read-only-copy"] == "true" for v in restored_volumes(run.arn))
    # AND the live array is as it was
    md = state.arrays["/dev/md0"]
    assert (md.members, md.failed, md.mount_point, md.md_uuid) == (
        fx.member_ids,
        False,
        fx.mount_point,
        fx.md_uuid,
    )
    # AND the next backup takes the live array, never the copy
    emu.clock.advance(60)
    backup = emu.run("backup", {"array": "db1"})
    assert backup.status == "SUCCEEDED", backup.cause
    assert backup.output["memberVolumeIds"] == fx.member_ids


def test_next_to_the_array_only_a_read_only_copy_with_places_of_its_own_is_restored(
    emu: Emulation,
) -> None:
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    mark = len(emu.double.calls)
    base = {"array": "db1", "initialization": "none"}
    # A writable copy next to the array: which one is the array would be a guess
    writable = emu.run("restore", base | {"mountPoint": "/mnt/x", "mdDevice": "/dev/md10"})
    assert (writable.status, writable.error) == ("FAILED", "InvalidInput")
    assert (writable.cause or "").startswith("mode:"), writable.cause
    assert "read-only copy" in (writable.cause or "") and "another instance" in (
        writable.cause or ""
    )
    # A read-only copy on the array's own md device or mount point (the defaults)
    same_device = emu.run("restore", base | {"readOnly": True, "mountPoint": "/mnt/x"})
    assert (same_device.status, same_device.error) == ("FAILED", "InvalidInput")
    assert (same_device.cause or "").startswith("mdDevice:"), same_device.cause
    same_mount = emu.run(
        "restore",
        base | {"readOnly": True, "mdDevice": "/dev/md10", "mountPoint": fx.mount_point},
    )
    assert (same_mount.status, same_mount.error) == ("FAILED", "InvalidInput")
    assert (same_mount.cause or "").startswith("mountPoint:"), same_mount.cause
    # Each refused before any change
    assert changes(emu, mark) == []
    for run in (writable, same_device, same_mount):
        assert restored_volumes(run.arn) == []


def test_a_stray_copy_of_a_member_on_the_target_keeps_its_identity_and_cannot_join(
    emu: Emulation,
) -> None:
    # GIVEN a copy target where someone attached a volume made by hand from one of the set's
    # snapshots (it carries the array's md UUID, and no tag a restore could recognise)
    fx = make_array(emu.hosts, "db1", 2)
    set_id = backed_up(emu.hosts, emu.run, fx)
    target = launch_instance("db1-copy", fx.availability_zone)
    snapshot = next(
        s["SnapshotId"]
        for s in sets_of("db1")[set_id]
        if tags_of(s)["raidsnap:member-index"] == "0"
    )
    ec2 = boto3.client("ec2")
    stray = ec2.create_volume(AvailabilityZone=fx.availability_zone, SnapshotId=str(snapshot))[
        "VolumeId"
    ]
    emu.clock.advance(emu.double.volume_seconds + 1)
    ec2.attach_volume(VolumeId=stray, InstanceId=target, Device="/dev/sdz")
    emu.clock.advance(emu.double.attach_seconds + 1)
    # WHEN a restore assembles the set there
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})
    # THEN the restored array gets an md UUID of its own: the stray keeps the set's, so it can
    # never be taken into the array at a boot; it is named in a warning and left as it was
    assert run.status == "SUCCEEDED", run.cause
    md = emu.hosts.state(target).arrays["/dev/md0"]
    assert (md.md_uuid, md.members) == (run.output["newMdUuid"], run.output["volumeIds"])
    assert md.md_uuid != fx.md_uuid and stray not in md.members
    assert emu.hosts.superblock(stray).md_uuid == fx.md_uuid  # type: ignore[union-attr]
    (view,) = ec2.describe_volumes(VolumeIds=[stray])["Volumes"]
    assert view["Attachments"][0]["InstanceId"] == target
    assert "raidsnap:md-uuid" not in tags_of(view)
