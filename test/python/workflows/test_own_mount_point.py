"""An array mounted at a system directory itself (/srv, /home, /opt) is backed up crash-consistent,
and it is restored in place: replacing it onto the mount point its set recorded, where the
instance's own release verified it was mounted, is the array's own mount point, not a new one.
The system-directory rule is for new mount points: an attach restore elsewhere, or a replace onto
another directory, is still refused before anything changes."""

from __future__ import annotations

import boto3
import pytest

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    alarm_event,
    backed_up,
    configure_recovery,
    create_topics,
    launch_instance,
    make_array,
    sets_of,
    sets_table,
)


def mounted_at(emu: Emulation, instance_id: str, mount_point: str) -> list[str]:
    return [
        md.md_uuid
        for md in emu.hosts.state(instance_id).arrays.values()
        if md.mount_point == mount_point
    ]


@pytest.mark.parametrize("mount_point", ["/srv", "/home", "/opt"])
def test_a_replace_restores_an_array_at_a_system_directory_onto_its_own_mount_point(
    emu: Emulation, mount_point: str
) -> None:
    # GIVEN db1 mounted at a system directory itself, backed up
    fx = make_array(emu.hosts, "db1", 3, mount_point=mount_point)
    backed_up(emu.hosts, emu.run, fx)
    # WHEN it is replaced in place, with no mount point given and with its own given
    by_set = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    by_input = emu.run(
        "restore",
        {"array": "db1", "mode": "replace", "initialization": "none", "mountPoint": mount_point},
    )
    # THEN both succeed and the restored array is mounted there again
    assert by_set.status == "SUCCEEDED", f"{by_set.error}: {by_set.cause}"
    assert by_input.status == "SUCCEEDED", f"{by_input.error}: {by_input.cause}"
    assert by_input.output["mountPoint"] == mount_point
    assert len(mounted_at(emu, fx.instance_id, mount_point)) == 1


def test_an_automated_recovery_replaces_an_array_at_srv(emu: Emulation) -> None:
    # GIVEN db1 at /srv, backed up, one of whose members is lost
    fx = make_array(emu.hosts, "db1", 3, mount_point="/srv")
    backed_up(emu.hosts, emu.run, fx)
    emu.hosts.lose_member(fx.instance_id, fx.member_ids[1])
    # WHEN the attached-EBS alarm starts a recovery
    started = emu.invoke("recovery_start", alarm_event(fx.instance_id))
    assert started.error_type is None, started.error_message
    run = emu.wait(started.result["executionArn"])
    # THEN it replaces the array at /srv
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert len(mounted_at(emu, fx.instance_id, "/srv")) == 1


def test_a_system_directory_is_still_refused_as_a_new_mount_point(emu: Emulation) -> None:
    # GIVEN db1 at /data, and a set of db1 at /srv of which a copy is wanted elsewhere
    fx = make_array(emu.hosts, "db1", 2, mount_point="/srv")
    backed_up(emu.hosts, emu.run, fx)
    other = launch_instance("db1-copy", fx.availability_zone)
    mark = len(emu.double.calls)
    # WHEN a copy is restored onto another instance (a new mount point there), or the array is
    # replaced onto another system directory than its own
    attach = emu.run("restore", {"array": "db1", "targetInstanceId": other, "mode": "attach"})
    elsewhere = emu.run("restore", {"array": "db1", "mode": "replace", "mountPoint": "/home"})
    # THEN both are refused on mountPoint before anything changes
    for run in (attach, elsewhere):
        assert (run.status, run.error) == ("FAILED", "InvalidInput"), run.cause
        assert (run.cause or "").startswith("mountPoint:"), run.cause
        assert "system directory" in (run.cause or ""), run.cause
    changes = [c.operation for c in emu.double.calls[mark:] if c.applied]
    assert not [op for op in changes if op in ("CreateVolume", "AttachVolume", "DetachVolume")]


def test_a_drill_warns_when_a_configured_recovery_could_never_mount_the_array(
    emu: Emulation,
) -> None:
    # GIVEN db1 at /srv, whose recovery restores onto a replacement if its instance is gone (a
    # new mount point there, which a restore refuses at a system directory itself)
    create_topics(emu)
    fx = make_array(emu.hosts, "db1", 3, mount_point="/srv")
    backed_up(emu.hosts, emu.run, fx)
    configure_recovery(
        emu, "db1", instanceId=fx.instance_id, replacementInstanceId="i-0fedcba9876543210"
    )
    drill_host = launch_instance("db1-drill", fx.availability_zone, tag_array=False)
    ec2 = boto3.client("ec2")
    ec2.create_tags(Resources=[drill_host], Tags=[{"Key": "raidsnap:array", "Value": "db1-drill"}])
    # WHEN the drill runs
    run = emu.run("drill", {"array": "db1", "targetInstanceId": drill_host})
    # THEN it passes (the set restores), and says the recovery onto the replacement would fail
    # and what to set
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    (warning,) = run.output["verification"]["warnings"]
    assert "replacementInstanceId i-0fedcba9876543210" in warning
    assert "recovery.mountPoint" in warning
    subjects = [c.params["Subject"] for c in emu.double.calls if c.operation == "Publish"]
    assert "raidsnap drill of db1: passed with a warning" in subjects


def test_a_retagged_mount_point_does_not_steer_a_replace_over_a_system_directory(
    emu: Emulation,
) -> None:
    # GIVEN db1 mounted at /data and backed up, and then someone allowed to tag snapshots sets
    # raidsnap:mount-point=/var on its newest set
    fx = make_array(emu.hosts, "db1", 2, mount_point="/data")
    set_id = backed_up(emu.hosts, emu.run, fx)
    snaps = [s["SnapshotId"] for s in sets_of("db1")[set_id]]
    ec2 = boto3.client("ec2")
    ec2.create_tags(Resources=snaps, Tags=[{"Key": "raidsnap:mount-point", "Value": "/var"}])
    # AND a member is lost, the broken array unmounted by hand (nothing on the instance shows
    # where it was mounted)
    emu.hosts.drop_device(fx.instance_id, fx.member_ids[1])
    emu.hosts.state(fx.instance_id).arrays["/dev/md0"].mount_point = None
    # WHEN a replace runs without a mountPoint, as a recovery sends it
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    # THEN it mounts where the backup recorded the array, and says the tag disagreed
    assert run.status == "SUCCEEDED", run.cause
    mounted = {md.mount_point for md in emu.hosts.state(fx.instance_id).arrays.values()}
    assert mounted == {"/data"} and run.output["mountPoint"] == "/data"
    assert any("tag says '/var'" in n and "'/data'" in n for n in run.output["notes"])


@pytest.mark.parametrize("mount_point", ["/srv", "/home"])
def test_a_set_recorded_before_manifests_kept_md_facts_still_recovers_in_place(
    emu: Emulation, mount_point: str
) -> None:
    # GIVEN db1 at a system directory itself, whose newest set was recorded before manifests
    # kept the md facts (only its snapshots' tags say where the array was mounted)
    fx = make_array(emu.hosts, "db1", 3, mount_point=mount_point)
    set_id = backed_up(emu.hosts, emu.run, fx)
    boto3.client("dynamodb").update_item(
        TableName=sets_table(),
        Key={"array": {"S": "db1"}, "setId": {"S": set_id}},
        UpdateExpression="REMOVE md",
    )
    # AND a member is lost, so no new backup can record them
    emu.hosts.lose_member(fx.instance_id, fx.member_ids[1])
    # WHEN the operator replaces the array, naming its mount point
    run = emu.run(
        "restore",
        {"array": "db1", "mode": "replace", "initialization": "none", "mountPoint": mount_point},
    )
    # THEN it is put back where it was, as before manifests kept the record
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert mounted_at(emu, fx.instance_id, mount_point) == [run.output["newMdUuid"]]
