"""Replace mode takes away only what the instance verified: the release document is given the
md UUID and refuses another array on the device, the md device is the one recorded when the set
was taken, and only volumes the instance reported as members of that array are detached. A
raidsnap tag on a volume proves nothing: anyone allowed to tag volumes can set it."""

from __future__ import annotations

import boto3

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import ArrayFixture, backed_up, make_array, sets_of, tags_of

REMOVALS = ("DetachVolume", "DeleteVolume")


def detached(emu: Emulation, since: int = 0) -> set[str]:
    return {
        str(c.params["VolumeId"])
        for c in emu.double.calls[since:]
        if c.operation == "DetachVolume" and c.applied
    }


def second_array(emu: Emulation, fx: ArrayFixture, md_device: str) -> tuple[list[str], str]:
    """An unrelated array (logs) of two more volumes on the same instance, at /logs."""
    ec2 = boto3.client("ec2")
    ids = [
        ec2.create_volume(AvailabilityZone=fx.availability_zone, Size=4)["VolumeId"]
        for _ in range(2)
    ]
    emu.clock.advance(emu.double.volume_seconds + 1)
    for vid, letter in zip(ids, "xy", strict=True):
        ec2.attach_volume(VolumeId=vid, InstanceId=fx.instance_id, Device=f"/dev/sd{letter}")
    emu.clock.advance(emu.double.attach_seconds + 1)
    uuid = emu.hosts.build_array(
        fx.instance_id, ids, name="logs", md_device=md_device, mount_point="/logs"
    )
    return ids, uuid


def test_replace_never_detaches_a_volume_trusted_only_by_its_tag(emu: Emulation) -> None:
    # GIVEN an array with a log volume attached next to it, which the operator tagged with the
    # array's name (as a cost tag, say)
    fx = make_array(emu.hosts, "db1", 3, unrelated=1)
    (log_volume,) = fx.other_volume_ids
    ec2 = boto3.client("ec2")
    ec2.create_tags(Resources=[log_volume], Tags=[{"Key": "raidsnap:array", "Value": "db1"}])
    backed_up(emu.hosts, emu.run, fx)
    # WHEN the array is replaced in place
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    # THEN only the members the instance reported were detached; the log volume stays
    assert detached(emu) == set(fx.member_ids)
    assert sorted(run.output["replacedVolumeIds"]) == sorted(fx.member_ids)
    (log,) = ec2.describe_volumes(VolumeIds=[log_volume])["Volumes"]
    assert log["Attachments"][0]["InstanceId"] == fx.instance_id
    assert "raidsnap:replaced-by" not in tags_of(log)


def test_replace_releases_the_md_device_recorded_with_the_set(emu: Emulation) -> None:
    # GIVEN db1 on /dev/md5, and another array (logs) on /dev/md0 of the same instance
    fx = make_array(emu.hosts, "db1", 3, unrelated=0, md_device="/dev/md5")
    logs, logs_uuid = second_array(emu, fx, "/dev/md0")
    set_id = backed_up(emu.hosts, emu.run, fx)
    # WHEN db1 is replaced in place (as a recovery does: no md device given)
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    # THEN /dev/md5 was released and the new array assembled there; logs is untouched
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["mdDevice"] == "/dev/md5"
    arrays = emu.hosts.state(fx.instance_id).arrays
    assert (arrays["/dev/md0"].md_uuid, arrays["/dev/md0"].members) == (logs_uuid, logs)
    assert arrays["/dev/md5"].members == run.output["volumeIds"]
    assert detached(emu) == set(fx.member_ids)
    # (the backup recorded the md device with the set)
    assert {tags_of(s)["raidsnap:md-device"] for s in sets_of("db1")[set_id]} == {"/dev/md5"}


def test_release_refuses_another_array_on_the_md_device_and_nothing_changes(
    emu: Emulation,
) -> None:
    # GIVEN db1 on /dev/md5 and logs on /dev/md0, and a replace that names /dev/md0 by mistake
    fx = make_array(emu.hosts, "db1", 3, unrelated=0, md_device="/dev/md5")
    logs, logs_uuid = second_array(emu, fx, "/dev/md0")
    backed_up(emu.hosts, emu.run, fx)
    mark = len(emu.double.calls)
    run = emu.run(
        "restore",
        {"array": "db1", "mode": "replace", "mdDevice": "/dev/md0", "initialization": "none"},
    )
    # THEN the release refused it by the md UUID, and no volume left the instance
    assert (run.status, run.error) == ("FAILED", "CommandFailed")
    assert "UuidMismatch" in (run.cause or "")
    assert detached(emu, mark) & (set(logs) | set(fx.member_ids)) == set()
    arrays = emu.hosts.state(fx.instance_id).arrays
    assert (arrays["/dev/md0"].md_uuid, arrays["/dev/md0"].members) == (logs_uuid, logs)
    assert arrays["/dev/md5"].members == fx.member_ids


def test_a_member_whose_device_dropped_off_is_detached_with_the_others(emu: Emulation) -> None:
    """The instance lost a member's NVMe device while EC2 still shows the volume attached: the
    release document cannot read its serial and reports it without a volume id. Left attached,
    the old member comes back at the next boot with the array's md UUID."""
    # GIVEN db1 (three members and a scratch volume), backed up
    fx = make_array(emu.hosts, "db1", 3, unrelated=1)
    backed_up(emu.hosts, emu.run, fx)
    # AND the third member's device drops off the instance
    emu.hosts.drop_device(fx.instance_id, fx.member_ids[2])
    # WHEN the array is replaced in place
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    # THEN every old member, the unmapped one included, is detached and kept; the scratch
    # volume stays
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert detached(emu) == set(fx.member_ids)
    assert sorted(run.output["replacedVolumeIds"]) == sorted(fx.member_ids)
    ec2 = boto3.client("ec2")
    for vol in ec2.describe_volumes(VolumeIds=fx.member_ids)["Volumes"]:
        assert vol["State"] == "available"
        assert tags_of(vol)["raidsnap:replaced-by"] == run.arn
    (scratch,) = ec2.describe_volumes(VolumeIds=fx.other_volume_ids)["Volumes"]
    assert scratch["Attachments"][0]["InstanceId"] == fx.instance_id
    assert any(fx.member_ids[2] in n for n in run.output["notes"]), run.output["notes"]


def test_an_unmapped_member_ec2_cannot_name_refuses_the_replace(emu: Emulation) -> None:
    """The dropped member is neither a volume the set was taken from nor one a restore of the
    array created (its tags were edited), and a scratch volume is attached as well: nothing says
    which volume the member is. The replace fails by name and detaches neither."""
    fx = make_array(emu.hosts, "db1", 3, unrelated=1)
    set_id = backed_up(emu.hosts, emu.run, fx)
    first = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert first.status == "SUCCEEDED", first.cause
    live = first.output["volumeIds"]
    ec2 = boto3.client("ec2")
    ec2.delete_tags(Resources=[live[2]], Tags=[{"Key": "raidsnap:restored-from"}])
    emu.hosts.drop_device(fx.instance_id, live[2])
    mark = len(emu.double.calls)
    run = emu.run(
        "restore",
        {"array": "db1", "setId": set_id, "mode": "replace", "initialization": "none"},
    )
    assert (run.status, run.error) == ("FAILED", "MemberNotIdentified"), run.cause
    assert "detach it by hand" in (run.cause or ""), run.cause
    assert detached(emu, mark) == set()
    for vid in (live[2], fx.other_volume_ids[0]):
        (vol,) = ec2.describe_volumes(VolumeIds=[vid])["Volumes"]
        assert vol["Attachments"][0]["InstanceId"] == fx.instance_id


def test_a_member_added_by_hand_since_the_set_and_then_lost_is_named_honestly(
    emu: Emulation,
) -> None:
    # GIVEN RAID 1 db1 (m0, m1) backed up; m1's device dropped off and the operator, following
    # raidsnap's degraded-array advice, removed it from md and added a new volume Z; then Z's
    # device dropped off too, before any backup recorded it
    fx = make_array(emu.hosts, "db1", 2, level="raid1", unrelated=1)
    backed_up(emu.hosts, emu.run, fx)
    m0, m1 = fx.member_ids
    ec2 = boto3.client("ec2")
    z = ec2.create_volume(AvailabilityZone=fx.availability_zone, Size=32, VolumeType="gp3")[
        "VolumeId"
    ]
    emu.clock.advance(emu.double.volume_seconds + 1)
    ec2.attach_volume(VolumeId=z, InstanceId=fx.instance_id, Device="/dev/sdq")
    emu.clock.advance(emu.double.attach_seconds + 1)
    emu.hosts.superblocks[z] = emu.hosts.superblocks[m1]
    emu.hosts.state(fx.instance_id).dropped.add(m1)
    emu.hosts.state(fx.instance_id).arrays["/dev/md0"].members = [m0, z]
    emu.hosts.drop_device(fx.instance_id, z)
    # WHEN a replace runs
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    # THEN EC2 cannot say which attached volume the lost member is: the record's m1 is detached
    # as it, and the output names Z, not in the record, as left attached; Z keeps the old md
    # UUID, which the restored array does not share, so it cannot join it at a boot
    assert run.status == "SUCCEEDED", run.cause
    md = emu.hosts.state(fx.instance_id).arrays["/dev/md0"]
    assert md.md_uuid == run.output["newMdUuid"] != emu.hosts.superblocks[z].md_uuid
    (note,) = [n for n in run.output["notes"] if "without a volume id" in n]
    assert m1 in note and z in note and "not in the record" in note, note
    assert "cannot join" in note, note


def test_a_failed_member_detached_from_ec2_is_no_reason_to_refuse_with_a_scratch_volume_there(
    emu: Emulation,
) -> None:
    # GIVEN db1 (RAID 0 of 3) with a scratch volume attached beside it, backed up; then a
    # member fails and is force-detached (EC2 shows it detached, the instance cannot read it)
    fx = make_array(emu.hosts, "db1", 3, unrelated=1)
    backed_up(emu.hosts, emu.run, fx)
    lost = fx.member_ids[1]
    ec2 = boto3.client("ec2")
    ec2.detach_volume(VolumeId=lost, Force=True)
    emu.clock.advance(emu.double.detach_seconds + 1)
    emu.hosts.lose_member(fx.instance_id, lost)
    mark = len(emu.double.calls)
    # WHEN the array is replaced
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    # THEN the lost member is the set's volume that is attached no more: the replace goes on,
    # detaching the two it can name and never the scratch volume
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert detached(emu, mark) >= {fx.member_ids[0], fx.member_ids[2]}
    assert fx.other_volume_ids[0] not in detached(emu, mark)
    (note,) = [n for n in run.output["notes"] if "without a volume id" in n]
    assert f"the record's {lost} are attached no more" in note, note
