"""The restore workflow, as synthesized, on the emulation."""

from __future__ import annotations

import threading
from typing import Any

import boto3
import pytest

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation, Execution
from raidsnap_emulation.world import (
    INSTANCE_TYPE,
    SLOW_EBS_INSTANCE_TYPE,
    ArrayFixture,
    backed_up,
    launch_instance,
    lock_table,
    make_array,
    make_old_set,
    name_in_config,
    restored_volumes,
    sets_of,
    sets_table,
    tags_of,
    terminate,
)

READS = ("Describe", "Get", "List")


def changes(emu: Emulation, since: int = 0) -> list[str]:
    """EC2 and SSM calls that changed something, since a mark in the call log."""
    return [
        f"{c.service}:{c.operation}"
        for c in emu.double.calls[since:]
        if c.applied and c.service in ("ec2", "ssm") and not c.operation.startswith(READS)
    ]


def calls(emu: Emulation, operation: str, since: int = 0) -> list[Any]:
    return [c for c in emu.double.calls[since:] if c.operation == operation and c.applied]


def commands_sent(emu: Emulation, kind: str) -> list[dict[str, list[str]]]:
    return [
        c.params["Parameters"]
        for c in calls(emu, "SendCommand")
        if str(c.params["DocumentName"]).endswith(f"-{kind}")
    ]


def world(
    emu: Emulation, members: int, *, replacement: bool = True, **array: Any
) -> tuple[ArrayFixture, str, str]:
    """An array with one backup; with ``replacement`` its instance is then lost and a new,
    untagged instance waits in the same AZ. Returns the array, the set id and the target."""
    fx = make_array(emu.hosts, "db1", members, **array)
    set_id = backed_up(emu.hosts, emu.run, fx)
    if not replacement:
        return fx, set_id, fx.instance_id
    terminate(fx.instance_id)
    kind = array.get("instance_type", INSTANCE_TYPE)
    target = launch_instance("db1-new", fx.availability_zone, tag_array=False, instance_type=kind)
    # The config names it for db1 (a replacement): the restore may take it and tag it.
    name_in_config(emu, "db1", target)
    return fx, set_id, target


def snapshots_intact(set_id: str, members: int) -> bool:
    snaps = sets_of("db1").get(set_id, [])
    return len(snaps) == members and all(s["State"] == "completed" for s in snaps)


def assert_restored(  # noqa: PLR0917 - reads as the sentence it checks
    emu: Emulation,
    run: Execution,
    fx: ArrayFixture,
    set_id: str,
    target: str,
    zone: str,
    *,
    volume_type: str = "gp3",
    iops: int | None = 16000,
    throughput: int | None = 1000,
) -> list[dict[str, Any]]:
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    out = run.output
    n = len(fx.member_ids)
    assert out["setId"] == set_id
    assert out["targetInstanceId"] == target
    assert out["availabilityZone"] == zone
    assert (out["mdDevice"], out["mountPoint"]) == ("/dev/md0", fx.mount_point)
    created = restored_volumes(run.arn)
    assert [v["VolumeId"] for v in created] == out["volumeIds"]
    assert len(created) == n
    snaps = {tags_of(s)["raidsnap:member-index"]: s for s in sets_of("db1")[set_id]}
    for index, vol in enumerate(created):
        snap = snaps[str(index)]
        t = tags_of(vol)
        assert vol["AvailabilityZone"] == zone
        assert vol["SnapshotId"] == snap["SnapshotId"]
        assert vol["Size"] == snap["VolumeSize"]
        assert vol["VolumeType"] == volume_type
        if iops is not None:
            assert vol["Iops"] == iops
        if throughput is not None:
            assert vol["Throughput"] == throughput
        assert vol["Encrypted"] == snap["Encrypted"]
        assert vol.get("KmsKeyId") == snap.get("KmsKeyId")
        assert t["raidsnap:array"] == "db1"
        assert t["raidsnap:restored-from"] == set_id
        assert t["raidsnap:restored-member-index"] == str(index)
        assert "raidsnap:set-id" not in t and "raidsnap:member-index" not in t
        assert t["raidsnap:restore-execution"] == run.arn
        assert len(t["raidsnap:restore-run"]) == 16
        assert t["Name"].startswith("db1-")
        assert [a["InstanceId"] for a in vol["Attachments"]] == [target]
        assert vol["Attachments"][0]["State"] == "attached"
    # The assemble document ran on the target with the members in slot order and the md UUID
    (assemble,) = commands_sent(emu, "assemble")
    assert assemble["VolumeIds"] == [",".join(out["volumeIds"])]
    assert assemble["MdUuid"] == [fx.md_uuid]
    assert assemble["Persist"] == ["true"]
    # and the restored array has an md UUID of its own, chosen by the run, tagged on its volumes
    assert assemble["NewMdUuid"] == [out["newMdUuid"]] and out["newMdUuid"] != fx.md_uuid
    assert out["mdUuid"] == fx.md_uuid
    md = emu.hosts.state(target).arrays["/dev/md0"]
    assert (md.md_uuid, md.members) == (out["newMdUuid"], out["volumeIds"])
    assert {tags_of(v).get("raidsnap:md-uuid") for v in created} == {out["newMdUuid"]}
    # Nothing of the set was touched, and the lock is free again
    assert snapshots_intact(set_id, n)
    assert lock_item(emu, "db1") is None
    return created


def lock_item(emu: Emulation, array: str) -> dict[str, Any] | None:
    table = lock_table()
    item = boto3.client("dynamodb").get_item(TableName=table, Key={"array": {"S": array}})
    return item.get("Item")


def fsr_states(emu: Emulation, snapshot_ids: list[str]) -> dict[str, str]:
    items = boto3.client("ec2").describe_fast_snapshot_restores(
        Filters=[{"Name": "snapshot-id", "Values": snapshot_ids}]
    )["FastSnapshotRestores"]
    return {i["SnapshotId"]: i["State"] for i in items}


# ---------------------------------------------------------------------- happy paths


@pytest.mark.parametrize("members", [2, 3, 8])
def test_restore_without_initialization_creates_attaches_and_assembles_every_member(
    emu: Emulation, members: int
) -> None:
    # GIVEN a set of an array whose instance is gone, and a new instance in the same AZ
    fx, set_id, target = world(emu, members)
    # WHEN the set is restored onto the new instance
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})
    # THEN N volumes exist as the snapshots were, attached to it, assembled by UUID
    assert_restored(emu, run, fx, set_id, target, fx.availability_zone)
    assert run.output["initialization"] == "none"
    assert commands_sent(emu, "prewarm") == []
    # AND the new instance now holds the array, so backups follow it
    instance = boto3.client("ec2").describe_instances(InstanceIds=[target])
    assert tags_of(instance["Reservations"][0]["Instances"][0])["raidsnap:array"] == "db1"


@pytest.mark.parametrize("members", [2, 3, 8])
def test_restore_with_fsr_enables_exactly_the_set_in_the_target_az_then_disables_it(
    emu: Emulation, members: int
) -> None:
    fx, set_id, target = world(emu, members, instance_type=SLOW_EBS_INSTANCE_TYPE)
    # EC2 allows 5 snapshots with FSR on per Region by default; 8 need a raised quota
    emu.double.fsr_region_limit = max(5, members)
    snapshot_ids = sorted(str(s["SnapshotId"]) for s in sets_of("db1")[set_id])
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "fsr"})
    created = assert_restored(emu, run, fx, set_id, target, fx.availability_zone)
    (enable,) = calls(emu, "EnableFastSnapshotRestores")
    assert sorted(enable.params["SourceSnapshotIds"]) == snapshot_ids
    assert enable.params["AvailabilityZones"] == [fx.availability_zone]
    # The volumes were created once FSR was enabled, and FSR is off again
    assert all(v["FastRestored"] for v in created)
    assert set(fsr_states(emu, snapshot_ids).values()) <= {"disabling", "disabled"}
    assert run.output["initialization"] == "fsr"
    # The workflow waited as long as FSR needed, not in tight loops
    assert run.states_entered.count("CheckFsr") <= 3


def test_restore_with_fsr_leaves_fsr_enabled_before_the_run_alone(emu: Emulation) -> None:
    fx, set_id, target = world(emu, 3, instance_type=SLOW_EBS_INSTANCE_TYPE)
    snapshot_ids = sorted(str(s["SnapshotId"]) for s in sets_of("db1")[set_id])
    ec2 = boto3.client("ec2")
    ec2.enable_fast_snapshot_restores(
        AvailabilityZones=[fx.availability_zone], SourceSnapshotIds=snapshot_ids[:1]
    )
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "fsr"})
    assert run.status == "SUCCEEDED", run.cause
    disabled = [
        s for c in calls(emu, "DisableFastSnapshotRestores") for s in c.params["SourceSnapshotIds"]
    ]
    assert sorted(disabled) == snapshot_ids[1:]
    assert fsr_states(emu, snapshot_ids)[snapshot_ids[0]] in ("enabling", "optimizing", "enabled")


def test_fsr_enabled_by_a_step_whose_answer_was_lost_is_still_disabled(emu: Emulation) -> None:
    # EC2 enables FSR but the answer is lost: on the retry the pairs look "already enabled",
    # yet they are this run's (the lock item recorded them first) and are disabled after
    fx, set_id, target = world(emu, 3, instance_type=SLOW_EBS_INSTANCE_TYPE)
    snapshot_ids = sorted(str(s["SnapshotId"]) for s in sets_of("db1")[set_id])
    emu.double.fail(
        "ec2", "EnableFastSnapshotRestores", code="RequestLimitExceeded", after_success=True
    )
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "fsr"})
    assert_restored(emu, run, fx, set_id, target, fx.availability_zone)
    disabled = [
        s for c in calls(emu, "DisableFastSnapshotRestores") for s in c.params["SourceSnapshotIds"]
    ]
    assert sorted(disabled) == snapshot_ids
    assert set(fsr_states(emu, snapshot_ids).values()) <= {"disabling", "disabled"}


@pytest.mark.parametrize("members", [2, 3, 8])
def test_restore_with_rate_passes_the_initialization_rate_to_every_volume(
    emu: Emulation, members: int
) -> None:
    fx, set_id, target = world(emu, members)
    run = emu.run(
        "restore",
        {
            "array": "db1",
            "targetInstanceId": target,
            "initialization": "rate",
            "initializationRate": 200,
        },
    )
    created = assert_restored(emu, run, fx, set_id, target, fx.availability_zone)
    assert [
        c.params["VolumeInitializationRate"] for c in calls(emu, "CreateVolume")[-members:]
    ] == [200] * members
    assert all(v["VolumeInitializationRate"] == 200 for v in created)
    assert commands_sent(emu, "prewarm") == []


@pytest.mark.parametrize("members", [2, 3, 8])
def test_restore_with_prewarm_reads_every_member_after_assembly(
    emu: Emulation, members: int
) -> None:
    fx, set_id, target = world(emu, members)
    run = emu.run(
        "restore", {"array": "db1", "targetInstanceId": target, "initialization": "prewarm"}
    )
    assert_restored(emu, run, fx, set_id, target, fx.availability_zone)
    # the prewarm runs once the array is assembled
    assert run.output["initialization"] == "prewarm"
    (prewarm,) = commands_sent(emu, "prewarm")
    assert prewarm["VolumeIds"] == [",".join(run.output["volumeIds"])]
    sent = [str(c.params["DocumentName"]).rsplit("-", 1)[1] for c in calls(emu, "SendCommand")]
    assert sent[-2:] == ["assemble", "prewarm"]
    assert emu.hosts.state(target).prewarmed == run.output["volumeIds"]
    assert run.output["prewarm"]["status"] == "success"
    sizes = boto3.client("ec2").describe_volumes(VolumeIds=run.output["volumeIds"])["Volumes"]
    assert run.output["prewarm"]["result"]["bytes"] == sum(v["Size"] for v in sizes) * 1024**3


def test_restore_into_another_az_creates_the_volumes_there(emu: Emulation) -> None:
    # GIVEN the array's instance still runs in us-east-1a, and a copy target in us-east-1b
    # (tagged with a name of its own, so the original keeps its backups)
    fx, set_id, _ = world(emu, 3, replacement=False, instance_type=SLOW_EBS_INSTANCE_TYPE)
    target = launch_instance("db1-copy", "us-east-1b", instance_type=SLOW_EBS_INSTANCE_TYPE)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "fsr"})
    assert_restored(emu, run, fx, set_id, target, "us-east-1b")
    (enable,) = calls(emu, "EnableFastSnapshotRestores")
    assert enable.params["AvailabilityZones"] == ["us-east-1b"]
    # AND the original array is untouched: no call named its members
    touched = [c for c in emu.double.calls if c.params.get("VolumeId") in fx.member_ids]
    assert [c.operation for c in touched if c.time > calls(emu, "CreateSnapshots")[-1].time] == []


def test_restore_of_an_encrypted_set_keeps_the_snapshot_kms_key(emu: Emulation) -> None:
    key = boto3.client("kms").create_key(Description="db1")["KeyMetadata"]["Arn"]
    fx, set_id, target = world(emu, 3, encrypted=True, kms_key_id=key)
    mark = len(emu.double.calls)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})
    created = assert_restored(emu, run, fx, set_id, target, fx.availability_zone)
    assert all(v["Encrypted"] and v["KmsKeyId"] == key for v in created)
    # the key comes with the snapshot: CreateVolume names no key of its own
    assert all("KmsKeyId" not in c.params for c in calls(emu, "CreateVolume", mark))


def test_restore_uses_the_volume_type_iops_and_throughput_asked_for(emu: Emulation) -> None:
    fx, set_id, target = world(emu, 3)
    mark = len(emu.double.calls)
    run = emu.run(
        "restore",
        {
            "array": "db1",
            "targetInstanceId": target,
            "initialization": "none",
            "volumeType": "io2",
            "iops": 20000,
        },
    )
    assert_restored(
        emu,
        run,
        fx,
        set_id,
        target,
        fx.availability_zone,
        volume_type="io2",
        iops=20000,
        throughput=None,
    )
    assert all("Throughput" not in c.params for c in calls(emu, "CreateVolume", mark))


def test_a_restored_array_is_backed_up_again(emu: Emulation) -> None:
    fx, _, target = world(emu, 3)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})
    assert run.status == "SUCCEEDED", run.cause
    emu.double.clock.advance(60)
    again = emu.run("backup", {"array": "db1"})
    assert again.status == "SUCCEEDED", again.cause
    assert again.output["instanceId"] == target
    assert again.output["memberVolumeIds"] == run.output["volumeIds"]
    new_set = sets_of("db1")[again.output["setId"]]
    # The set records the restored array's own md UUID, which discovery read on the instance
    new_uuid = run.output["newMdUuid"]
    assert new_uuid != fx.md_uuid
    assert {tags_of(s)["raidsnap:md-uuid"] for s in new_set} == {new_uuid}
    # and a replace from that set releases the array under that UUID and restores it: the new
    # array gets an identity of its own again
    emu.double.clock.advance(60)
    second = emu.run(
        "restore",
        {
            "array": "db1",
            "setId": again.output["setId"],
            "mode": "replace",
            "initialization": "none",
        },
    )
    assert second.status == "SUCCEEDED", second.cause
    (release,) = commands_sent(emu, "release")
    assert release["MdUuid"] == [new_uuid]
    md = emu.hosts.state(target).arrays["/dev/md0"]
    assert md.md_uuid == second.output["newMdUuid"] not in (new_uuid, fx.md_uuid)
    assert md.members == second.output["volumeIds"]
    assert second.output["replacedVolumeIds"] == sorted(run.output["volumeIds"])


def test_restore_transitions_do_not_grow_with_members(template: object) -> None:
    counts = {}
    for members in (2, 8, 16):
        with Emulation() as emu:
            emu.double.volume_seconds = 0
            emu.double.attach_seconds = 0
            _, _, target = world(emu, members, unrelated=0)
            run = emu.run(
                "restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"}
            )
            assert run.status == "SUCCEEDED", run.cause
            counts[members] = run.transitions
    assert counts[2] == counts[8] == counts[16]


def test_more_members_than_single_letter_device_names_attach_too(emu: Emulation) -> None:
    # 21 names /dev/sd[f-z], 2 of them taken on the target: the 20th member needs another name
    fx, set_id, target = world(emu, 20, unrelated=0)
    ec2 = boto3.client("ec2")
    for letter in "fg":
        extra = ec2.create_volume(AvailabilityZone=fx.availability_zone, Size=1)["VolumeId"]
        emu.double.clock.advance(emu.double.volume_seconds + 1)
        ec2.attach_volume(VolumeId=extra, InstanceId=target, Device=f"/dev/sd{letter}")
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})
    assert_restored(emu, run, fx, set_id, target, fx.availability_zone)
    devices = run.output["devices"]
    assert len(set(devices)) == 20
    assert "/dev/sdf" not in devices
    assert devices[-2:] == ["/dev/sdz", "/dev/xvdba"]


# ---------------------------------------------------------------------- replace mode


def test_replace_releases_the_broken_array_keeps_the_old_members_and_assembles_the_set(
    emu: Emulation,
) -> None:
    # GIVEN an array whose instance still runs, and a set of it
    fx, set_id, target = world(emu, 3, replacement=False)
    # WHEN the set replaces the array on its own instance
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert run.status == "SUCCEEDED", run.cause
    # THEN the release document ran first, with the md device and mount point
    sent = [str(c.params["DocumentName"]).rsplit("-", 1)[1] for c in calls(emu, "SendCommand")]
    assert sent[-2:] == ["release", "assemble"]
    (release,) = commands_sent(emu, "release")
    assert release == {
        "MdDevice": ["/dev/md0"],
        "MountPoint": [fx.mount_point],
        "MdUuid": [fx.md_uuid],
        # The array goes back on the mount point the set recorded: its own.
        "OwnMountPoint": ["true"],
    }
    # AND the old members are detached, kept, and tagged replaced-by this execution
    ec2 = boto3.client("ec2")
    old = ec2.describe_volumes(VolumeIds=fx.member_ids)["Volumes"]
    assert all(v["State"] == "available" and not v["Attachments"] for v in old)
    assert {tags_of(v)["raidsnap:replaced-by"] for v in old} == {run.arn}
    assert sorted(run.output["replacedVolumeIds"]) == sorted(fx.member_ids)
    # AND neither the unrelated volume nor the boot volume was touched
    detached = {c.params["VolumeId"] for c in calls(emu, "DetachVolume")}
    assert detached == set(fx.member_ids)
    # AND the new array is assembled from the new volumes
    assert_restored(emu, run, fx, set_id, target, fx.availability_zone)
    assert "DeleteVolume" not in [c.operation for c in emu.double.calls]


# ---------------------------------------------------------------------- faults


def test_throttling_on_every_ec2_and_ssm_call_still_restores(emu: Emulation) -> None:
    fx, set_id, target = world(emu, 3, instance_type=SLOW_EBS_INSTANCE_TYPE)
    emu.double.throttle_everything("ec2", times_each=2)
    emu.double.throttle_everything("ssm", times_each=2)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "fsr"})
    assert_restored(emu, run, fx, set_id, target, fx.availability_zone)
    throttled = {c.operation for c in emu.double.calls if c.error_code == "RequestLimitExceeded"}
    assert {"CreateVolume", "AttachVolume", "EnableFastSnapshotRestores"} <= throttled


def test_create_volume_retried_after_it_succeeded_makes_no_second_volume(
    emu: Emulation,
) -> None:
    # EC2 creates the volume but the answer is lost: the step fails and the workflow retries it
    fx, set_id, target = world(emu, 3)
    emu.double.fail("ec2", "CreateVolume", code="RequestLimitExceeded", after_success=True)
    mark = len(emu.double.calls)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})
    assert_restored(emu, run, fx, set_id, target, fx.availability_zone)
    assert len(restored_volumes(run.arn)) == 3
    tokens = [
        c.params["ClientToken"] for c in emu.double.calls[mark:] if c.operation == "CreateVolume"
    ]
    assert len(tokens) == 4
    assert len(set(tokens)) == 3


def test_a_volume_in_error_fails_the_run_and_removes_every_volume_it_created(
    emu: Emulation,
) -> None:
    _, set_id, target = world(emu, 3)
    bad = next(
        s["SnapshotId"]
        for s in sets_of("db1")[set_id]
        if tags_of(s)["raidsnap:member-index"] == "1"
    )
    emu.double.fail_volumes(str(bad))
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})
    assert (run.status, run.error) == ("FAILED", "VolumeFailed")
    assert "member 1" in (run.cause or "")
    assert restored_volumes(run.arn) == []
    assert len(calls(emu, "DeleteVolume")) == 3
    assert snapshots_intact(set_id, 3)
    assert lock_item(emu, "db1") is None


def test_fsr_stuck_enabling_past_the_limit_falls_back_to_prewarm_and_is_disabled(
    emu: Emulation,
) -> None:
    fx, set_id, target = world(emu, 3, instance_type=SLOW_EBS_INSTANCE_TYPE)
    snapshot_ids = sorted(str(s["SnapshotId"]) for s in sets_of("db1")[set_id])
    emu.double.stick_fsr("enabling")
    start = emu.double.clock.now()
    mark = len(emu.double.calls)
    run = emu.run(
        "restore",
        {
            "array": "db1",
            "targetInstanceId": target,
            "initialization": "fsr",
            # More than FSR needs at EC2's pace for these members (about 9 min), less than
            # their prewarm on this instance.
            "fsrTimeoutSeconds": 600,
        },
    )
    created = assert_restored(emu, run, fx, set_id, target, fx.availability_zone)
    assert run.output["initialization"] == "prewarm"
    assert run.output["requestedInitialization"] == "fsr"
    assert any("FSR was not usable after 600 s" in n for n in run.output["notes"])
    # FSR was disabled before the volumes were created, and the members were prewarmed
    (disable,) = calls(emu, "DisableFastSnapshotRestores")
    assert sorted(disable.params["SourceSnapshotIds"]) == snapshot_ids
    assert disable.time <= calls(emu, "CreateVolume", mark)[0].time
    assert not any(v["FastRestored"] for v in created)
    assert len(commands_sent(emu, "prewarm")) == 1
    # AND the limit was kept: the run gave up after the time it was given, not long after
    assert (disable.time - start).total_seconds() <= 600 + 60


def test_failed_assemble_removes_everything_the_run_created_and_touches_nothing_else(
    emu: Emulation,
) -> None:
    # GIVEN an array still running on its instance, and a copy target in the same AZ
    fx, set_id, _ = world(emu, 3, replacement=False, instance_type=SLOW_EBS_INSTANCE_TYPE)
    target = launch_instance("db1-copy", fx.availability_zone)
    emu.hosts.fail_next(
        "assemble",
        CommandOutcome(
            status="Failed",
            stderr="mdadm: /dev/nvme1n1 has wrong uuid.\nraidsnap: UuidMismatch: refusing",
            exit_code=1,
        ),
    )
    mark = len(emu.double.calls)
    # WHEN the restore's assemble document fails on the target
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "fsr"})
    # THEN the run fails with CommandFailed carrying the document's stderr tail
    assert (run.status, run.error) == ("FAILED", "CommandFailed")
    assert "UuidMismatch: refusing" in (run.cause or "")
    assert "deleted the 3 volumes this run created" in (run.cause or "")
    # AND zero volumes of this run exist, each detached before it was deleted
    assert restored_volumes(run.arn) == []
    assert not [c for c in emu.double.calls[mark:] if c.error_code == "VolumeInUse"]
    assert len(calls(emu, "DeleteVolume", mark)) == 3
    # AND FSR is disabled, every snapshot intact, the old members untouched and attached
    snapshot_ids = [str(s["SnapshotId"]) for s in sets_of("db1")[set_id]]
    assert set(fsr_states(emu, snapshot_ids).values()) <= {"disabling", "disabled"}
    assert snapshots_intact(set_id, 3)
    assert not [c for c in emu.double.calls[mark:] if c.params.get("VolumeId") in fx.member_ids]
    old = boto3.client("ec2").describe_volumes(VolumeIds=fx.member_ids)["Volumes"]
    assert all(v["Attachments"][0]["InstanceId"] == fx.instance_id for v in old)
    assert "DeleteSnapshot" not in changes(emu, mark)
    assert lock_item(emu, "db1") is None


def test_cleanup_forces_a_stuck_detach_and_at_last_names_what_it_could_not_remove(
    emu: Emulation,
) -> None:
    _, _, target = world(emu, 2)
    emu.hosts.fail_next(
        "assemble", CommandOutcome(status="Failed", stderr="mdadm: busy", exit_code=1)
    )
    emu.double.detach_seconds = 100_000  # EC2 never finishes detaching
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})
    assert (run.status, run.error) == ("FAILED", "CommandFailed")
    assert "could not remove volumes" in (run.cause or "")
    # a normal detach first, then forced ones; never a DeleteVolume on an attached volume
    forced = [c.params.get("Force") for c in calls(emu, "DetachVolume")]
    assert forced[:2] == [False, False]
    assert True in forced
    assert calls(emu, "DeleteVolume") == []
    assert len(restored_volumes(run.arn)) == 2


def test_failure_after_replace_attaches_the_old_members_again_and_says_so(
    emu: Emulation,
) -> None:
    fx, _, _ = world(emu, 3, replacement=False)
    emu.hosts.fail_next(
        "assemble", CommandOutcome(status="Failed", stderr="mdadm: no superblock", exit_code=1)
    )
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert (run.status, run.error) == ("FAILED", "CommandFailed")
    # the old members the replace detached are attached again and the array is back, as the
    # cause says; the run's volumes are gone
    assert "put back" in (run.cause or "") and "attached again" in (run.cause or "")
    old = boto3.client("ec2").describe_volumes(VolumeIds=fx.member_ids)["Volumes"]
    assert all(v["State"] == "in-use" for v in old)
    assert emu.hosts.state(fx.instance_id).arrays["/dev/md0"].members == fx.member_ids
    assert restored_volumes(run.arn) == []


def test_offline_agent_is_refused_with_instance_not_ready_and_nothing_changes(
    emu: Emulation,
) -> None:
    _, _, target = world(emu, 3)
    emu.double.set_agent(target, online=False)
    mark = len(emu.double.calls)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target})
    assert (run.status, run.error) == ("FAILED", "InstanceNotReady")
    assert target in (run.cause or "")
    assert changes(emu, mark) == []
    assert lock_item(emu, "db1") is None


def test_incomplete_set_is_refused(emu: Emulation) -> None:
    fx, _, _ = world(emu, 3, replacement=False)
    make_old_set(emu.hosts, fx, "db1-partial", missing_index=1)
    mark = len(emu.double.calls)
    run = emu.run("restore", {"array": "db1", "setId": "db1-partial"})
    assert (run.status, run.error) == ("FAILED", "IncompleteSnapshotSet")
    assert "members 1 of 3 have no snapshot" in (run.cause or "")
    assert changes(emu, mark) == []


def test_unknown_set_is_refused(emu: Emulation) -> None:
    world(emu, 3, replacement=False)
    mark = len(emu.double.calls)
    run = emu.run("restore", {"array": "db1", "setId": "db1-nope"})
    assert (run.status, run.error) == ("FAILED", "SnapshotSetNotFound")
    assert "db1-nope" in (run.cause or "")
    assert changes(emu, mark) == []


def test_latest_without_any_complete_set_is_refused(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3)
    make_old_set(emu.hosts, fx, "db1-partial", missing_index=0)
    run = emu.run("restore", {"array": "db1"})
    assert (run.status, run.error) == ("FAILED", "SnapshotSetNotFound")
    assert "incomplete" in (run.cause or "")


def test_without_the_array_instance_a_target_is_required(emu: Emulation) -> None:
    world(emu, 3)
    run = emu.run("restore", {"array": "db1"})
    assert (run.status, run.error) == ("FAILED", "ArrayNotFound")
    assert "give targetInstanceId" in (run.cause or "")


def test_a_set_taken_without_discovery_needs_the_md_uuid_given(emu: Emulation) -> None:
    # GIVEN a set taken while the agent was offline: members from tags, no md facts recorded
    fx = make_array(emu.hosts, "db1", 3, tag_members=True)
    emu.double.set_agent(fx.instance_id, online=False)
    set_id = backed_up(emu.hosts, emu.run, fx)
    terminate(fx.instance_id)
    target = launch_instance("db1-new", fx.availability_zone, tag_array=False)
    name_in_config(emu, "db1", target)
    # WHEN it is restored without an md UUID, THEN it is refused before any change
    mark = len(emu.double.calls)
    request = {"array": "db1", "targetInstanceId": target, "initialization": "none"}
    run = emu.run("restore", request)
    assert (run.status, run.error) == ("FAILED", "InvalidInput")
    assert (run.cause or "").startswith("mdUuid:")
    assert changes(emu, mark) == []
    # AND with the UUID given it restores, mounted where the operator says
    run = emu.run("restore", request | {"mdUuid": fx.md_uuid, "mountPoint": "/data"})
    assert_restored(emu, run, fx, set_id, target, fx.availability_zone)


def tag_set(set_id: str, key: str, value: str) -> None:
    """Re-tag every snapshot of a set, as anyone allowed to tag snapshots can."""
    ids = [s["SnapshotId"] for s in sets_of("db1")[set_id]]
    boto3.client("ec2").create_tags(Resources=ids, Tags=[{"Key": key, "Value": value}])


def recorded_before_md_facts(set_id: str) -> None:
    """The set's manifest as backups wrote it before they kept the md facts: its tags are then
    all a restore has to go by (a set with the record goes by the record,
    test_own_mount_point.py)."""
    boto3.client("dynamodb").update_item(
        TableName=sets_table(),
        Key={"array": {"S": "db1"}, "setId": {"S": set_id}},
        UpdateExpression="REMOVE md",
    )


@pytest.mark.parametrize("tagged", ["/etc", "/etc/cron.d", "//etc/"])
def test_a_set_whose_mount_point_tag_is_a_system_directory_is_refused_unless_one_is_given(
    emu: Emulation, tagged: str
) -> None:
    # GIVEN a set recorded before manifests kept md facts, whose raidsnap:mount-point tag was
    # changed to a system directory
    fx, set_id, target = world(emu, 3)
    recorded_before_md_facts(set_id)
    tag_set(set_id, "raidsnap:mount-point", tagged)
    request = {"array": "db1", "targetInstanceId": target, "initialization": "none"}
    # WHEN it is restored without a mountPoint, THEN it is refused before any change
    mark = len(emu.double.calls)
    run = emu.run("restore", request)
    assert (run.status, run.error) == ("FAILED", "InvalidInput")
    cause = run.cause or ""
    assert cause.startswith("mountPoint:"), cause
    assert "raidsnap:mount-point" in cause and "system directory /etc" in cause, cause
    assert "Pass mountPoint explicitly" in cause, cause
    assert changes(emu, mark) == []
    assert commands_sent(emu, "assemble") == []
    assert restored_volumes(run.arn) == [] and lock_item(emu, "db1") is None
    # AND with a mount point of its own given, it restores there (one of the allowed places)
    run = emu.run("restore", request | {"mountPoint": "/srv/postgresql"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["mountPoint"] == "/srv/postgresql"
    (assemble,) = commands_sent(emu, "assemble")
    assert assemble["MountPoint"] == ["/srv/postgresql"]
    assert snapshots_intact(set_id, len(fx.member_ids))


def test_a_set_whose_mount_point_tag_is_no_path_is_mounted_at_the_default(
    emu: Emulation,
) -> None:
    _, set_id, target = world(emu, 2)
    recorded_before_md_facts(set_id)
    tag_set(set_id, "raidsnap:mount-point", "srv/pg data")
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["mountPoint"] == "/mnt/db1"
    assert any("is not usable; mounted at /mnt/db1" in n for n in run.output["notes"])


def test_a_second_restore_of_the_same_array_is_refused_while_the_first_runs(
    emu: Emulation,
) -> None:
    fx, set_id, target = world(emu, 3)
    router = emu.router
    assert router is not None
    # Hold the first restore just before its assemble step, in real time
    gate = threading.Event()
    holding = threading.Event()

    def gated(params: dict[str, Any]) -> dict[str, Any]:
        name = str(params["FunctionName"]).rsplit(":", 1)[-1]
        if router.functions[name].handler.endswith("restore_command.handler"):
            holding.set()
            gate.wait(30)
        return router(params)

    emu.double.route("lambda", "Invoke", gated)
    first = emu.start(
        "restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"}
    )
    assert holding.wait(30)
    # WHEN a second restore of db1 starts while the first holds the lock
    second = emu.run("restore", {"array": "db1", "targetInstanceId": target})
    gate.set()
    done = emu.wait(first)
    # THEN the second is refused without touching anything, and the first completes
    assert (second.status, second.error) == ("FAILED", "RestoreInProgress")
    assert first in (second.cause or "")
    assert restored_volumes(second.arn) == []
    assert_restored(emu, done, fx, set_id, target, fx.availability_zone)
    assert lock_item(emu, "db1") is None


@pytest.mark.parametrize("holder", ["finished", "lease-expired"])
def test_a_lock_whose_holder_is_gone_is_taken_over(emu: Emulation, holder: str) -> None:
    fx, set_id, target = world(emu, 3)
    if holder == "finished":  # a restore that ended without releasing, lease still valid
        arn, lease = emu.run("restore", {"array": "nope"}).arn, "99999999999"
    else:  # whatever the holder, its lease ran out
        arn, lease = "arn:aws:states:us-east-1:123456789012:execution:raidsnap-restore:x", "1"
    table = lock_table()
    boto3.client("dynamodb").put_item(
        TableName=table,
        Item={
            "array": {"S": "db1"},
            "executionArn": {"S": arn},
            "setId": {"S": set_id},
            "leaseUntil": {"N": lease},
        },
    )
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})
    assert_restored(emu, run, fx, set_id, target, fx.availability_zone)
    assert any(f"took over the restore lock of db1 from {arn}" in n for n in run.output["notes"])


def test_retention_keeps_the_set_a_running_restore_holds(emu: Emulation) -> None:
    # GIVEN 2 sets and a retention of 1 for the next backup, and a restore holding the older
    fx = make_array(emu.hosts, "db1", 3)
    make_old_set(emu.hosts, fx, "db1-held")
    table = lock_table()
    running = "arn:aws:states:us-east-1:123456789012:execution:raidsnap-restore:held"
    boto3.client("dynamodb").put_item(
        TableName=table,
        Item={
            "array": {"S": "db1"},
            "executionArn": {"S": running},
            "setId": {"S": "db1-held"},
            "leaseUntil": {"N": "99999999999"},
        },
    )
    make_old_set(emu.hosts, fx, "db1-old")
    # WHEN a backup applies retention that would delete every older set
    for _ in range(7):
        emu.double.clock.advance(60)
        assert emu.run("backup", {"array": "db1"}).status == "SUCCEEDED"
    # THEN the held set stays while the older unheld one went
    remaining = set(sets_of("db1"))
    assert "db1-held" in remaining
    assert "db1-old" not in remaining


def test_a_read_only_copy_is_mounted_read_only_and_not_recorded_for_boot(emu: Emulation) -> None:
    # GIVEN db1 backed up, and a second instance to look at the copy on
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    viewer = launch_instance("db1-viewer", fx.availability_zone, tag_array=False)
    boto3.client("ec2").create_tags(
        Resources=[viewer], Tags=[{"Key": "raidsnap:array", "Value": "db1-viewer"}]
    )
    # WHEN a read-only restore mounts the copy there
    run = emu.run(
        "restore",
        {
            "array": "db1",
            "targetInstanceId": viewer,
            "readOnly": True,
            "mountPoint": "/mnt/db1-yesterday",
            "mdDevice": "/dev/md10",
            "initialization": "none",
        },
    )
    # THEN it is assembled read-only and nothing on the instance records it for the next boot
    assert run.status == "SUCCEEDED", run.cause
    (assemble,) = [
        c.params["Parameters"]
        for c in emu.double.calls
        if c.operation == "SendCommand" and str(c.params["DocumentName"]).endswith("-assemble")
    ]
    assert (assemble["ReadOnly"], assemble["Persist"]) == (["true"], ["false"])
    state = emu.hosts.state(viewer)
    assert state.arrays["/dev/md10"].read_only
    assert (state.fstab, state.mdadm_conf) == ({}, {})


def test_a_new_md_uuid_given_is_the_arrays_and_the_sets_own_is_refused(emu: Emulation) -> None:
    fx, _set_id, target = world(emu, 2)
    request = {"array": "db1", "targetInstanceId": target, "initialization": "none"}
    mark = len(emu.double.calls)
    # The set's own identity: a restored array never shares it
    shared = emu.run("restore", request | {"newMdUuid": fx.md_uuid})
    assert (shared.status, shared.error) == ("FAILED", "InvalidInput")
    assert (shared.cause or "").startswith("newMdUuid:"), shared.cause
    assert changes(emu, mark) == []
    # One of the caller's: the array gets it
    chosen = "0123abcd:4567ef01:89abcdef:01234567"
    run = emu.run("restore", request | {"newMdUuid": chosen})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["newMdUuid"] == chosen
    assert emu.hosts.state(target).arrays["/dev/md0"].md_uuid == chosen
