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


def test_a_read_only_look_next_to_the_live_array_on_its_instance_is_refused_up_front(
    emu: Emulation,
) -> None:
    # GIVEN db1, live and mounted on its instance, with last night's set
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    mark = len(emu.double.calls)
    # WHEN a read-only copy is asked for next to it, on the same instance
    run = emu.run(
        "restore",
        {
            "array": "db1",
            "mountPoint": "/mnt/db1-yesterday",
            "mdDevice": "/dev/md10",
            "readOnly": True,
            "initialization": "none",
        },
    )
    # THEN it is refused before any change, naming the field and the way out
    assert (run.status, run.error) == ("FAILED", "InvalidInput")
    cause = run.cause or ""
    assert cause.startswith("mode:"), cause
    assert "same md UUID" in cause and "another instance" in cause, cause
    assert changes(emu, mark) == []
    assert restored_volumes(run.arn) == []
    # AND the live array is as it was
    md = emu.hosts.state(fx.instance_id).arrays["/dev/md0"]
    assert (md.members, md.failed, md.mount_point) == (fx.member_ids, False, fx.mount_point)
    assert "/dev/md10" not in emu.hosts.state(fx.instance_id).arrays


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
