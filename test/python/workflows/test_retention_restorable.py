"""Retention counts only sets that can be restored, and never deletes the newest restorable set.
A set whose snapshot lost raidsnap's array tag (a tag policy, a person tidying tags) is still
listed by its manifest, but the restore may create volumes only from snapshots that carry the
array and set tags: such a set cannot be restored on AWS, and must not count."""

from __future__ import annotations

import json

import boto3

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import backed_up, launch_instance, make_array, sets_of

BACKUP_EVERY = 4 * 3600


def test_a_set_whose_snapshot_lost_the_array_tag_is_not_counted_restorable(
    emu: Emulation,
) -> None:
    # GIVEN two sets of db1
    fx = make_array(emu.hosts, "db1", 3)
    first = backed_up(emu.hosts, emu.run, fx)
    emu.clock.advance(BACKUP_EVERY)
    second = backed_up(emu.hosts, emu.run, fx)
    # AND one snapshot of the newer set lost its raidsnap:array tag
    ec2 = boto3.client("ec2")
    member = sorted(str(s["SnapshotId"]) for s in sets_of("db1")[second])[0]
    ec2.delete_tags(Resources=[member], Tags=[{"Key": "raidsnap:array"}])
    emu.clock.advance(60)

    # WHEN the newest set raidsnap reports as complete is restored
    report = emu.invoke("monitor_set_age", {})
    assert report.error_type is None, report.error_message
    newest = report.result["arrays"]["db1"]["newestCompleteSet"]
    target = launch_instance("db1-copy", fx.availability_zone)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})

    # THEN the set it counts as the newest restorable one can indeed be restored
    assert run.status == "SUCCEEDED", f"newest complete {newest} (older {first}): " + (
        f"{run.error}: {run.cause}"
    )


def test_sets_taken_from_tags_alone_do_not_evict_the_only_set_with_an_md_uuid(
    emu: Emulation,
) -> None:
    # GIVEN db1 (members tagged, so backups can fall back to the tags) backed up once with its
    # agent online: that set records the md UUID
    fx = make_array(emu.hosts, "db1", 3, tag_members=True)
    with_uuid = backed_up(emu.hosts, emu.run, fx)
    # AND eight backups while the agent is offline (retention keeps 7 by default): they take
    # their members from the tags and record no md UUID
    emu.double.set_agent(fx.instance_id, online=False)
    tags_only = []
    for _ in range(8):
        emu.clock.advance(BACKUP_EVERY)
        tags_only.append(backed_up(emu.hosts, emu.run, fx))
    emu.double.set_agent(fx.instance_id, online=True)
    emu.clock.advance(60)

    # WHEN the age check runs and a restore of "latest" starts onto a new instance
    report = emu.invoke("monitor_set_age", {})
    target = launch_instance("db1-copy", fx.availability_zone)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})

    # THEN the set with the md UUID survived retention, the age check reports it (not a set
    # nobody can restore without help), and the restore uses it
    assert with_uuid in sets_of("db1")
    assert report.error_type is None, report.error_message
    assert report.result["arrays"]["db1"]["newestCompleteSet"] == with_uuid
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["setId"] == with_uuid
    # AND the restore says that newer sets exist that it could not restore by itself
    assert tags_only[-1] in json.dumps(run.output)
