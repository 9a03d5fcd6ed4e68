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
