"""The sweeper deletes volumes of restores that ended badly. A restore can end FAILED after its
assemble document assembled and mounted the array (the workflow only lost the answer): the run
leaves those volumes attached and says the array is the user's. From then on they are the
user's, and a user who unmounts and detaches them (to move the array to another instance, or by
terminating the instance, which detaches non-root volumes) must find them where they left them."""

from __future__ import annotations

import json
from typing import Any

import boto3
from test_sweeper import crash, fsr_active, live_volumes  # the same scenarios' helpers

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    SLOW_EBS_INSTANCE_TYPE,
    backed_up,
    launch_instance,
    make_array,
    restored_volumes,
    sets_of,
)

SWEEP_EVERY = 15 * 60


def fail_look_at_assemble(emu: Emulation) -> None:
    """The first look at the assemble document fails: it ran, the workflow never learned it."""
    router = emu.router
    assert router is not None
    done: list[bool] = []

    def invoke(params: dict[str, Any]) -> Any:
        raw = params.get("Payload") or b"{}"
        event = json.loads(raw.decode() if isinstance(raw, bytes | bytearray) else raw)
        name = str(params["FunctionName"]).rsplit(":", 1)[-1]
        module = router.functions[name].handler.rsplit(".", 2)[-2]
        if (
            not done
            and module == "command_poll"
            and str(event["command"]["document"]).endswith("-assemble")
        ):
            done.append(True)
            emu.double.fail("ssm", "GetCommandInvocation", times=1, code="InternalServerError")
        return router(params)

    emu.double.route("lambda", "Invoke", invoke)


def test_the_sweeper_never_deletes_an_array_a_failed_restore_left_assembled_and_mounted(
    emu: Emulation,
) -> None:
    # GIVEN a restore that assembled and mounted the array, but ended FAILED because the look at
    # the assemble document failed; it left the array to the user, and says so
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    target = launch_instance("db1-copy", fx.availability_zone)
    fail_look_at_assemble(emu)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})
    assert run.status == "FAILED"
    created = sorted(v["VolumeId"] for v in restored_volumes(run.arn))
    assert len(created) == 3
    assert "assembled and mounted at /data" in (run.cause or ""), run.cause
    # AND the user, who now owns the array, detaches its volumes to move it to another instance
    ec2 = boto3.client("ec2")
    for vid in created:
        ec2.detach_volume(VolumeId=vid)
    emu.clock.advance(60)
    assert {v["State"] for v in ec2.describe_volumes(VolumeIds=created)["Volumes"]} == {"available"}

    # WHEN the sweeper runs on its schedule
    emu.clock.advance(SWEEP_EVERY)
    done = emu.invoke("sweep", {})
    assert done.error_type is None, done.error_message

    # THEN the user's array volumes still exist: the sweeper deleted none of them
    assert done.result["deletedVolumeIds"] == [], done.result
    left = ec2.describe_volumes(Filters=[{"Name": "volume-id", "Values": created}])["Volumes"]
    assert sorted(v["VolumeId"] for v in left if v["State"] == "available") == created


def test_the_sweeper_never_deletes_old_members_a_replace_restore_kept(emu: Emulation) -> None:
    # GIVEN an array whose members a replace restore created, a restore that ended FAILED only
    # because the look at its assemble document failed: the array is assembled and mounted on
    # the array's own instance, and the user runs on it
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    fail_look_at_assemble(emu)
    first = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert first.status == "FAILED"
    members = sorted(v["VolumeId"] for v in restored_volumes(first.arn))
    assert len(members) == 3
    md = emu.hosts.state(fx.instance_id).arrays["/dev/md0"]
    assert (sorted(md.members), md.mount_point) == (members, fx.mount_point), first.cause
    # AND later a second replace restore, which keeps the members it replaces, detached and
    # tagged raidsnap:replaced-by, so the user can go back to them
    second = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert second.status == "SUCCEEDED", f"{second.error}: {second.cause}"
    ec2 = boto3.client("ec2")
    replaced = ec2.describe_volumes(VolumeIds=members)["Volumes"]
    assert {v["State"] for v in replaced} == {"available"}

    # WHEN the sweeper runs on its schedule
    emu.clock.advance(SWEEP_EVERY)
    done = emu.invoke("sweep", {})
    assert done.error_type is None, done.error_message

    # THEN the replaced members, kept by the second restore, still exist
    assert done.result["deletedVolumeIds"] == [], done.result
    left = ec2.describe_volumes(Filters=[{"Name": "volume-id", "Values": members}])["Volumes"]
    assert sorted(v["VolumeId"] for v in left if v["State"] == "available") == members


def test_one_fsr_the_sweeper_may_not_disable_does_not_stop_it_removing_the_rest(
    emu: Emulation,
) -> None:
    # GIVEN a restore with FSR whose volume ends in error, and whose cleanup then crashes: the
    # run ends FailedUnexplained and leaves its volumes and its FSR to the sweeper
    fx = make_array(emu.hosts, "db1", 3, instance_type=SLOW_EBS_INSTANCE_TYPE)
    set_id = backed_up(emu.hosts, emu.run, fx)
    snapshots = sorted(str(s["SnapshotId"]) for s in sets_of("db1")[set_id])
    emu.double.fail_volumes(snapshots[0])
    crash(emu, "restore_cleanup")
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "fsr"})
    assert run.status == "FAILED"
    created = sorted(v["VolumeId"] for v in live_volumes(run.arn))
    assert len(created) == 3
    assert fsr_active(fx.availability_zone)
    # AND one snapshot of the set lost its raidsnap:array tag, so the sweeper's grant does not
    # cover turning its FSR off (AWS authorizes each snapshot of the request)
    boto3.client("ec2").delete_tags(Resources=[snapshots[1]], Tags=[{"Key": "raidsnap:array"}])

    # WHEN the sweeper runs on its schedule
    emu.clock.advance(SWEEP_EVERY)
    done = emu.invoke("sweep", {})

    # THEN it still removes what it may: the run's detached volumes are deleted, and the sweep
    # reports rather than fails on the one pair it may not touch
    assert done.error_type is None, f"{done.error_type}: {done.error_message}"
    assert live_volumes(run.arn) == []
