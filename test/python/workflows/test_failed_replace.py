"""A replace that fails after the release document took the array out of service puts it back
(it is the user's): the old members, attached again where the run had detached them, are
assembled and mounted as they were, and the cause says so. Where that cannot be done (a member
lost, an old member that cannot be attached again), the cause says exactly what state the
instance is in and the commands that bring the array back, and never that nothing else
changed."""

from __future__ import annotations

from typing import Any

import boto3
from faults import crash

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import backed_up, make_array, restored_volumes, tags_of


def _replace(emu: Emulation) -> Any:
    return emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})


def test_a_replace_whose_detach_step_crashes_after_release_puts_the_array_back(
    emu: Emulation,
) -> None:
    # GIVEN db1 mounted at /data, backed up
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    # WHEN a replace restore releases it and then its DetachOldMembers step crashes
    crash(emu, "restore_detach_old")
    run = _replace(emu)
    # THEN the run fails, and the array is back in service: the old members assembled under
    # their md UUID and mounted where they were
    assert run.status == "FAILED", run.cause
    md = emu.hosts.state(fx.instance_id).arrays.get("/dev/md0")
    assert md is not None, run.cause
    assert (md.members, md.md_uuid, md.mount_point) == (fx.member_ids, fx.md_uuid, "/data")
    # AND the new volumes are gone, the old ones untouched and not marked replaced
    assert [v for v in restored_volumes(run.arn) if v["State"] != "deleted"] == []
    for vol in boto3.client("ec2").describe_volumes(VolumeIds=fx.member_ids)["Volumes"]:
        assert vol["Attachments"][0]["InstanceId"] == fx.instance_id
        assert "raidsnap:replaced-by" not in tags_of(vol)
    # AND the cause says the array was released and put back
    cause = run.cause or ""
    assert "put back" in cause and "/data" in cause, cause


def test_a_replace_that_crashes_after_tagging_the_old_members_puts_the_array_back(
    emu: Emulation,
) -> None:
    # GIVEN db1, and a replace whose detach step tags the old members, then crashes
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    crash(emu, "restore_detach_old", after=1)
    run = _replace(emu)
    # THEN the array is back, and the old members carry no replaced-by tag (nothing replaced them)
    assert run.status == "FAILED", run.cause
    md = emu.hosts.state(fx.instance_id).arrays.get("/dev/md0")
    assert md is not None and md.mount_point == "/data", run.cause
    for vol in boto3.client("ec2").describe_volumes(VolumeIds=fx.member_ids)["Volumes"]:
        assert "raidsnap:replaced-by" not in tags_of(vol), run.cause
    assert "put back" in (run.cause or ""), run.cause


def test_a_replace_that_fails_after_the_old_members_left_attaches_them_again_and_puts_it_back(
    emu: Emulation,
) -> None:
    # GIVEN db1, and a replace that detached the old members, then cannot attach the new ones
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    ec2 = boto3.client("ec2")
    before = {
        v["VolumeId"]: v["Attachments"][0]["Device"]
        for v in ec2.describe_volumes(VolumeIds=fx.member_ids)["Volumes"]
    }
    crash(emu, "restore_attach")
    run = _replace(emu)
    # THEN the run fails, and the array is back: the old members attached again on the devices
    # they had, assembled under their md UUID and mounted where they were, no longer marked
    assert run.status == "FAILED", run.cause
    md = emu.hosts.state(fx.instance_id).arrays.get("/dev/md0")
    assert md is not None, run.cause
    assert (md.members, md.md_uuid, md.mount_point) == (fx.member_ids, fx.md_uuid, "/data")
    after = ec2.describe_volumes(VolumeIds=fx.member_ids)["Volumes"]
    assert {v["VolumeId"]: v["Attachments"][0]["Device"] for v in after} == before
    assert all("raidsnap:replaced-by" not in tags_of(v) for v in after)
    assert [v for v in restored_volumes(run.arn) if v["State"] != "deleted"] == []
    cause = run.cause or ""
    assert "put back" in cause and "attached again" in cause, cause


def test_a_replace_whose_old_members_cannot_attach_again_says_how_to_bring_them_back(
    emu: Emulation,
) -> None:
    # GIVEN db1, and a replace that detached the old members, then cannot attach the new ones,
    # and EC2 refuses to attach an old member again
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    crash(emu, "restore_attach")
    emu.double.fail("ec2", "AttachVolume", code="AttachmentLimitExceeded")
    run = _replace(emu)
    # THEN the cause does not claim nothing else changed: it says the array is out of service,
    # where the old members are, and the commands that bring it back
    assert run.status == "FAILED", run.cause
    assert "/dev/md0" not in emu.hosts.state(fx.instance_id).arrays
    cause = run.cause or ""
    assert "not in service" in cause, cause
    for vid in fx.member_ids:
        assert vid in cause, cause
    assert "aws ec2 attach-volume" in cause and f"--instance-id {fx.instance_id}" in cause
    assert f"mdadm --assemble /dev/md0 --uuid={fx.md_uuid}" in cause, cause
    assert "mount /dev/md0 /data" in cause, cause


def test_the_cause_after_a_failed_replace_with_a_lost_member_says_where_its_members_are(
    emu: Emulation,
) -> None:
    # GIVEN db1 (RAID 0 of 3) whose third member's NVMe device dropped off
    fx = make_array(emu.hosts, "db1", 3, unrelated=1)
    backed_up(emu.hosts, emu.run, fx)
    emu.hosts.drop_device(fx.instance_id, fx.member_ids[2])
    # WHEN a replace releases it, detaches every old member, and then the assemble fails
    emu.hosts.fail_next(
        "assemble",
        CommandOutcome(
            status="Failed",
            stdout='{"ok": false, "error": "AssembleFailed", "message": "not enough to start"}',
            stderr="mdadm: /dev/md0 assembled from 2 drives - not enough to start the array.",
            exit_code=1,
            duration_seconds=3,
        ),
    )
    run = _replace(emu)
    # THEN the run fails, and its cause says the old members are detached (all of them, the
    # lost one too) and kept, with the commands that attach each one back, never that they are
    # still attached
    assert run.status == "FAILED"
    cause = run.cause or ""
    attached = {
        v["VolumeId"]
        for v in boto3.client("ec2").describe_volumes(VolumeIds=fx.member_ids)["Volumes"]
        if any(a["State"] == "attached" for a in v["Attachments"])
    }
    assert attached == set(), attached
    assert "still attached" not in cause, cause
    for vid in fx.member_ids:
        assert f"aws ec2 attach-volume --volume-id {vid} " in cause, cause
    assert "mdadm --assemble /dev/md0" in cause, cause
