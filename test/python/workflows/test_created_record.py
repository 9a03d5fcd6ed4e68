"""What the workflows delete is what they recorded creating. Tags are no proof: anyone allowed
ec2:CreateTags can put a run's execution ARN and nonce on a volume of their own. The sweeper, the
cleanup after a stopped run and a run's own failure path delete only volumes the run recorded
(in the lock table) when CreateVolume gave it their ids; a tagged volume it never recorded is
reported, and kept."""

from __future__ import annotations

from typing import Any

import boto3
from faults import crash
from test_restore_abandoned import status_change, stop_while_held
from test_sweeper import live_volumes, sweep

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    HeldStep,
    backed_up,
    create_topics,
    launch_instance,
    make_array,
    sets_of,
)


def tag_of(volume: dict[str, Any], key: str) -> str:
    return next(t["Value"] for t in volume.get("Tags", []) if t["Key"] == key)


def impostor(zone: str, execution_arn: str, run: str) -> str:
    """A volume raidsnap did not create, tagged with a run's execution ARN and its nonce."""
    return str(
        boto3.client("ec2").create_volume(
            AvailabilityZone=zone,
            Size=4,
            TagSpecifications=[
                {
                    "ResourceType": "volume",
                    "Tags": [
                        {"Key": "raidsnap:restore-execution", "Value": execution_arn},
                        {"Key": "raidsnap:restore-run", "Value": run},
                        {"Key": "raidsnap:array", "Value": "db1"},
                    ],
                }
            ],
        )["VolumeId"]
    )


def exists(volume_id: str) -> bool:
    found = boto3.client("ec2").describe_volumes(
        Filters=[{"Name": "volume-id", "Values": [volume_id]}]
    )["Volumes"]
    return bool(found) and found[0]["State"] not in ("deleting", "deleted")


def test_the_sweeper_deletes_a_failed_runs_volumes_but_not_one_tagged_as_its_own(
    emu: Emulation,
) -> None:
    # GIVEN a restore whose volume ends in error and whose cleanup crashes: its volumes stay
    fx = make_array(emu.hosts, "db1", 3)
    set_id = backed_up(emu.hosts, emu.run, fx)
    emu.double.fail_volumes(sorted(s["SnapshotId"] for s in sets_of("db1")[set_id])[0])
    crash(emu, "restore_cleanup")
    run = emu.run("restore", {"array": "db1", "mode": "replace"})
    assert run.status == "FAILED"
    created = sorted(v["VolumeId"] for v in live_volumes(run.arn))
    assert len(created) == 3
    # AND someone tags a volume of their own with the run's ARN and its nonce
    nonce = tag_of(live_volumes(run.arn)[0], "raidsnap:restore-run")
    foreign = impostor(fx.availability_zone, run.arn, nonce)

    # WHEN the sweeper runs
    found = sweep(emu)

    # THEN the run's own volumes are deleted, the impostor is reported and kept
    assert sorted(found["deletedVolumeIds"]) == created
    assert foreign in found["unknownRunVolumeIds"]
    assert exists(foreign)
    # AND once nothing of the run is left, its record goes, and the impostor stays unknown
    again = sweep(emu)
    assert again["deletedVolumeIds"] == [] and foreign in again["unknownRunVolumeIds"]
    assert exists(foreign)


def test_the_cleanup_after_a_stopped_run_never_deletes_a_volume_it_did_not_record(
    emu: Emulation,
) -> None:
    # GIVEN a restore stopped while its volumes are being created
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    arn = stop_while_held(emu, "restore_check_volumes", {"array": "db1", "mode": "replace"})
    created = sorted(v["VolumeId"] for v in live_volumes(arn))
    assert len(created) == 3
    foreign = impostor(
        fx.availability_zone, arn, tag_of(live_volumes(arn)[0], "raidsnap:restore-run")
    )
    emu.clock.advance(emu.double.volume_seconds + 1)

    # WHEN the end of the run reaches the cleanup function
    done = emu.invoke("restore_abandoned", status_change(emu, arn, "ABORTED"))

    # THEN the run's volumes are deleted; the impostor is reported and kept
    assert done.error_type is None, done.error_message
    assert sorted(done.result["deletedVolumeIds"]) == created
    assert done.result["unknownVolumeIds"] == [foreign]
    assert exists(foreign)


def test_a_failed_runs_own_cleanup_never_deletes_a_volume_it_did_not_record(
    emu: Emulation,
) -> None:
    # GIVEN a restore whose volume ends in error, held as its cleanup begins
    fx = make_array(emu.hosts, "db1", 3)
    set_id = backed_up(emu.hosts, emu.run, fx)
    emu.double.fail_volumes(sorted(s["SnapshotId"] for s in sets_of("db1")[set_id])[0])
    held = HeldStep(emu, "restore_cleanup")
    arn = emu.start("restore", {"array": "db1", "mode": "replace"})
    held.wait()
    created = sorted(v["VolumeId"] for v in live_volumes(arn))
    assert len(created) == 3
    # AND meanwhile someone tags a volume of their own as the run's
    foreign = impostor(
        fx.availability_zone, arn, tag_of(live_volumes(arn)[0], "raidsnap:restore-run")
    )

    # WHEN the cleanup goes on
    held.release()
    run = emu.wait(arn)

    # THEN it deleted what the run created, reported the impostor, and kept it
    assert run.status == "FAILED"
    assert live_volumes(arn) == [v for v in live_volumes(arn) if v["VolumeId"] == foreign]
    assert exists(foreign)
    assert foreign in (run.cause or ""), run.cause


def test_a_drills_teardown_never_deletes_a_volume_its_restore_did_not_create(
    emu: Emulation,
) -> None:
    # GIVEN a drill held as its teardown begins, its restore's volumes made and tagged
    create_topics(emu)
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    drill_host = launch_instance("db1-drill", fx.availability_zone, tag_array=False)
    boto3.client("ec2").create_tags(
        Resources=[drill_host], Tags=[{"Key": "raidsnap:array", "Value": "db1-drill"}]
    )
    held = HeldStep(emu, "drill_teardown")
    arn = emu.start("drill", {"array": "db1", "targetInstanceId": drill_host})
    held.wait()
    restore_arn = next(
        str(tag_of(v, "raidsnap:restore-execution"))
        for v in boto3.client("ec2").describe_volumes()["Volumes"]
        if any(t["Key"] == "raidsnap:restore-execution" for t in v.get("Tags", []))
    )
    (made,) = {tag_of(v, "raidsnap:restore-run") for v in live_volumes(restore_arn)}
    # AND someone copies the restore's tags onto a volume of their own
    foreign = impostor(fx.availability_zone, restore_arn, made)

    # WHEN the teardown goes on
    held.release()
    run = emu.wait(arn)

    # THEN the restore's own volumes are gone, and the impostor is kept
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert [v["VolumeId"] for v in live_volumes(restore_arn)] == [foreign]
    assert exists(foreign)
