"""What ended restores leave behind: Fast Snapshot Restore each run owns (its own record, never
overwritten by a lock takeover), and volumes of runs that ended without removing them. The
sweeper, invoked as its schedule would, removes what is raidsnap's and nothing else."""

from __future__ import annotations

from typing import Any

import boto3
from faults import crash

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    SLOW_EBS_INSTANCE_TYPE,
    HeldStep,
    alarm_event,
    backed_up,
    launch_instance,
    make_array,
    restored_volumes,
    sets_of,
    tags_of,
)

SWEEP_EVERY = 15 * 60
ACTIVE = ("enabling", "optimizing", "enabled")


def fsr_active(zone: str) -> list[str]:
    rows = boto3.client("ec2").describe_fast_snapshot_restores(
        Filters=[{"Name": "availability-zone", "Values": [zone]}]
    )["FastSnapshotRestores"]
    return sorted(r["SnapshotId"] for r in rows if r["State"] in ACTIVE)


def live_volumes(execution_arn: str) -> list[dict[str, Any]]:
    return [v for v in restored_volumes(execution_arn) if v["State"] not in ("deleting", "deleted")]


def sweep(emu: Emulation) -> dict[str, Any]:
    emu.clock.advance(SWEEP_EVERY)
    done = emu.invoke("sweep", {})
    assert done.error_type is None, done.error_message
    return dict(done.result)


def drill_host(emu: Emulation, zone: str) -> str:
    # Slow enough to read the members on that a restore asked for FSR takes it.
    host = launch_instance("db1-drill", zone, tag_array=False, instance_type=SLOW_EBS_INSTANCE_TYPE)
    boto3.client("ec2").create_tags(
        Resources=[host], Tags=[{"Key": "raidsnap:array", "Value": "db1-drill"}]
    )
    return host


def test_fsr_a_preempted_drill_enabled_is_turned_off_although_a_recovery_took_its_lock(
    emu: Emulation,
) -> None:
    # GIVEN a drill restoring with Fast Snapshot Restore, held while its volumes are created
    fx = make_array(emu.hosts, "db1", 3, instance_type=SLOW_EBS_INSTANCE_TYPE)
    set_id = backed_up(emu.hosts, emu.run, fx)
    snapshots = sorted(s["SnapshotId"] for s in sets_of("db1")[set_id])
    held = HeldStep(emu, "restore_check_volumes")
    drill = emu.start(
        "drill", {"array": "db1", "targetInstanceId": drill_host(emu, fx.availability_zone),
                  "initialization": "fsr"},
    )  # fmt: skip
    held.wait()
    assert fsr_active(fx.availability_zone) == snapshots
    # WHEN the array's volume fails: a recovery stops the drill's restore and takes the lock
    started = emu.invoke("recovery_start", alarm_event(fx.instance_id))
    assert started.result["started"], started.result
    held.release()
    recovery = emu.wait(started.result["executionArn"])
    assert recovery.status == "SUCCEEDED", recovery.cause
    assert emu.wait(drill).status == "FAILED"
    # AND the end of the drill's restore reaches the stack's rules (after the takeover)
    restore_arn = next(
        e["executionArn"]
        for e in boto3.client("stepfunctions").list_executions(
            stateMachineArn=emu.state_machines["restore"], statusFilter="ABORTED"
        )["executions"]
    )
    deliveries = emu.services.execution_event(restore_arn)
    assert deliveries and all(d.delivered for d in deliveries)

    # THEN the FSR the drill's restore enabled is off: it was recorded as that run's own
    assert fsr_active(fx.availability_zone) == []


def test_the_sweeper_removes_what_a_run_that_ended_unexplained_left(emu: Emulation) -> None:
    # GIVEN a restore with FSR whose volume ends in error, and whose cleanup then crashes: the
    # run ends FailedUnexplained, which no rule cleans up after
    fx = make_array(emu.hosts, "db1", 3, instance_type=SLOW_EBS_INSTANCE_TYPE)
    set_id = backed_up(emu.hosts, emu.run, fx)
    snapshot = sorted(s["SnapshotId"] for s in sets_of("db1")[set_id])[0]
    emu.double.fail_volumes(snapshot)
    crash(emu, "restore_cleanup")
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "fsr"})
    assert run.status == "FAILED"
    created = sorted(v["VolumeId"] for v in live_volumes(run.arn))
    assert len(created) == 3
    assert fsr_active(fx.availability_zone)
    for delivery in emu.services.execution_event(run.arn):
        assert delivery.result is None or delivery.result.error_type is None

    # WHEN the sweeper runs on its schedule
    found = sweep(emu)

    # THEN the run's volumes are deleted and its FSR is off; the old members, which the replace
    # had released and detached while EC2 created the volumes (the run's cleanup that would
    # have put them back crashed), are kept as they are
    assert sorted(found["deletedVolumeIds"]) == created
    assert live_volumes(run.arn) == []
    assert fsr_active(fx.availability_zone) == []
    old = boto3.client("ec2").describe_volumes(VolumeIds=fx.member_ids)["Volumes"]
    assert [(v["State"], tags_of(v)["raidsnap:replaced-by"]) for v in old] == [
        ("available", run.arn)
    ] * len(fx.member_ids)
    # AND a second sweep finds nothing more
    again = sweep(emu)
    assert (again["deletedVolumeIds"], again["fsrDisabled"]) == ([], [])


def test_volumes_still_creating_when_the_stop_cleanup_gave_up_are_swept_later(
    emu: Emulation,
) -> None:
    # GIVEN a restore stopped by hand while its volumes are still being created (slowly)
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    emu.double.volume_seconds = 900
    held = HeldStep(emu, "restore_create_volumes")
    arn = emu.start("restore", {"array": "db1", "mode": "replace"}, name="stopped-slowly")
    held.wait()
    boto3.client("stepfunctions").stop_execution(executionArn=arn)
    held.release()
    assert emu.wait(arn).status == "ABORTED"
    # AND the rule's cleanup, with Lambda's two retries of an asynchronous invocation, ends
    # while they are still creating
    (cleanup,) = [
        d
        for d in emu.services.execution_event(arn)
        if d.result is not None and d.result.module == "restore_abandoned"
    ]
    assert [a.error_type for a in cleanup.attempts] == ["CleanupPendingError"] * 3
    created = sorted(v["VolumeId"] for v in live_volumes(arn))
    assert len(created) == 3

    # WHEN the sweeper runs on its schedule until they exist
    deleted: list[str] = []
    for _ in range(4):
        deleted += sweep(emu)["deletedVolumeIds"]

    # THEN every volume the run created is deleted, and nothing else
    assert sorted(deleted) == created
    assert live_volumes(arn) == []
    md = emu.hosts.state(fx.instance_id).arrays["/dev/md0"]
    assert (md.members, md.failed) == (fx.member_ids, False)


def test_the_sweeper_never_touches_a_succeeded_restore_a_running_one_or_a_foreign_volume(
    emu: Emulation,
) -> None:
    # GIVEN a restore that succeeded, whose volumes the operator later detached (the array is
    # theirs), a restore still running, and a volume someone tagged as raidsnap's
    fx = make_array(emu.hosts, "db1", 3, instance_type=SLOW_EBS_INSTANCE_TYPE)
    backed_up(emu.hosts, emu.run, fx)
    done = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "fsr"})
    assert done.status == "SUCCEEDED", done.cause
    ec2 = boto3.client("ec2")
    for vid in done.output["volumeIds"]:
        ec2.detach_volume(VolumeId=vid)
    copy_host = drill_host(emu, fx.availability_zone)
    held = HeldStep(emu, "restore_check_volumes")
    running = emu.start(
        "restore", {"array": "db1", "targetInstanceId": copy_host, "mountPoint": "/mnt/x",
                    "mdDevice": "/dev/md5", "initialization": "fsr"},
    )  # fmt: skip
    held.wait()
    foreign = ec2.create_volume(
        AvailabilityZone=fx.availability_zone,
        Size=4,
        TagSpecifications=[
            {
                "ResourceType": "volume",
                "Tags": [{"Key": "raidsnap:restore-execution", "Value": "arn:aws:states:x"}],
            }
        ],
    )["VolumeId"]
    active = fsr_active(fx.availability_zone)
    assert active
    mark = len(emu.double.calls)

    # WHEN the sweeper runs
    found = sweep(emu)

    # THEN it deleted and disabled nothing
    assert (found["deletedVolumeIds"], found["fsrDisabled"]) == ([], [])
    assert [
        c.operation
        for c in emu.double.calls[mark:]
        if c.applied
        and c.operation in ("DeleteVolume", "DetachVolume", "DisableFastSnapshotRestores")
    ] == []
    assert fsr_active(fx.availability_zone) == active
    assert len(live_volumes(done.arn)) == 3
    assert ec2.describe_volumes(VolumeIds=[foreign])["Volumes"]
    held.release()
    assert emu.wait(running).status == "SUCCEEDED"
