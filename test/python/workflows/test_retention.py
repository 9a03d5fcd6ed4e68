"""Retention, as the backup workflow applies it on the emulation: it deletes only the snapshots
raidsnap recorded for its own sets, and counts only sets that can be restored."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    backed_up,
    launch_instance,
    make_array,
    sets_of,
    tags_of,
)

BACKUP_EVERY = 4 * 3600


def snapshot_ids() -> set[str]:
    pages = boto3.client("ec2").get_paginator("describe_snapshots").paginate(OwnerIds=["self"])
    return {s["SnapshotId"] for page in pages for s in page["Snapshots"]}


def forge(volume_id: str, values: dict[str, str]) -> str:
    """A snapshot some other tool (or person) took and tagged with raidsnap's tags."""
    ec2 = boto3.client("ec2")
    snapshot = ec2.create_snapshot(VolumeId=volume_id, Description="taken by another tool")
    ec2.create_tags(
        Resources=[snapshot["SnapshotId"]],
        Tags=[{"Key": k, "Value": v} for k, v in values.items()],
    )
    return str(snapshot["SnapshotId"])


def newest_complete(emu: Emulation) -> Any:
    report = emu.invoke("monitor_set_age", {})
    assert report.error_type is None, report.error_message
    return report.result["arrays"]["db1"]["newestCompleteSet"]


def test_retention_never_deletes_snapshots_raidsnap_did_not_take(emu: Emulation) -> None:
    # GIVEN two sets of db1, and the older one restored onto another instance
    fx = make_array(emu.hosts, "db1", 3)
    first = backed_up(emu.hosts, emu.run, fx)
    emu.clock.advance(BACKUP_EVERY)
    second = backed_up(emu.hosts, emu.run, fx)
    copy_host = launch_instance("db1-copy", fx.availability_zone, tag_array=False)
    ec2 = boto3.client("ec2")
    ec2.create_tags(Resources=[copy_host], Tags=[{"Key": "raidsnap:array", "Value": "db1-copy"}])
    restore = emu.run(
        "restore",
        {
            "array": "db1",
            "setId": first,
            "targetInstanceId": copy_host,
            "mountPoint": "/mnt/db1-copy",
            "mdDevice": "/dev/md1",
            "initialization": "none",
        },
    )
    assert restore.status == "SUCCEEDED", restore.cause
    emu.clock.advance(60)
    # AND another tool snapshots the restored volumes, copying the volumes' tags onto them (as
    # Data Lifecycle Manager's copy-tags, or the console's "copy tags from source volume")
    copied = ec2.create_snapshots(
        InstanceSpecification={"InstanceId": copy_host, "ExcludeBootVolume": True},
        CopyTagsFromSource="volume",
        Description="nightly image of db1-copy",
    )["Snapshots"]
    assert all(tags_of(s).get("raidsnap:array") == "db1" for s in copied)
    # AND someone tagged snapshots of their own with raidsnap's set tags: one joins the older
    # set as member 1, one pretends to be a newer complete set of one member
    forged_member = forge(
        fx.other_volume_ids[0],
        {
            "raidsnap:array": "db1",
            "raidsnap:set-id": first,
            "raidsnap:member-index": "1",
            "raidsnap:member-count": "3",
        },
    )
    emu.clock.advance(BACKUP_EVERY)
    forged_set = forge(
        fx.other_volume_ids[0],
        {
            "raidsnap:array": "db1",
            "raidsnap:set-id": "db1-forged",
            "raidsnap:member-index": "0",
            "raidsnap:member-count": "1",
        },
    )
    foreign = {s["SnapshotId"] for s in copied} | {forged_member, forged_set}
    emu.clock.advance(emu.double.snapshot_seconds + 1)

    # WHEN the next backup runs (retention keeps 7 complete sets; only 3 exist)
    run = emu.run("backup", {"array": "db1"})

    # THEN no snapshot raidsnap did not take was deleted, every set raidsnap took is still
    # there and complete, and the run says which snapshots it did not recognise
    assert run.status == "SUCCEEDED", run.cause
    third = run.output["setId"]
    assert foreign <= snapshot_ids()
    sets = sets_of("db1")
    for set_id in (first, second, third):
        own = [s for s in sets[set_id] if s["SnapshotId"] not in foreign]
        assert len(own) == 3, set_id
    assert run.output["retention"]["deletedSets"] == []
    assert sorted(run.output["retention"]["unrecordedSnapshots"]) == sorted(foreign)
    # AND the newest complete set is the newest one raidsnap took, not the forged one
    assert newest_complete(emu) == third


def test_a_degraded_array_is_backed_up_as_degraded_and_never_costs_the_last_good_set(
    emu: Emulation,
) -> None:
    # GIVEN a RAID 10 of four members with one good set
    fx = make_array(emu.hosts, "db1", 4, level="raid10")
    good = backed_up(emu.hosts, emu.run, fx)
    # AND then md fails the member in slot 2 and it is removed from the array, which runs on
    emu.hosts.degrade(fx.instance_id, fx.member_ids[2], removed=True)

    # WHEN seven scheduled backups run while the array is degraded (retention keeps 7)
    runs = []
    for _ in range(7):
        emu.clock.advance(BACKUP_EVERY)
        runs.append(emu.run("backup", {"array": "db1", "trigger": "schedule"}))

    # THEN each took a set of the three working members, marked degraded, and failed with
    # ArrayDegraded naming the missing slot, so the operator is paged
    for run in runs:
        assert (run.status, run.error) == ("FAILED", "ArrayDegraded"), run.cause
        assert "md has no working member in slot 2 of 4" in (run.cause or ""), run.cause
    sets = sets_of("db1")
    degraded = [s for s in sets if s != good]
    assert len(degraded) == 7
    for set_id in degraded:
        snaps = sets[set_id]
        assert sorted(tags_of(s)["raidsnap:member-index"] for s in snaps) == ["0", "1", "3"]
        assert {tags_of(s)["raidsnap:member-count"] for s in snaps} == {"4"}
        assert {tags_of(s)["raidsnap:degraded"] for s in snaps} == {"true"}
    # AND the good set is still there and still the one "latest" restores
    assert len(sets[good]) == 4
    assert newest_complete(emu) == good
    restore = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert restore.status == "SUCCEEDED", restore.cause
    assert restore.output["setId"] == good


def test_spares_and_faulty_members_hold_no_slot_and_do_not_stop_the_backup(
    emu: Emulation,
) -> None:
    # GIVEN a RAID 5 of three members with a hot spare (attached, no slot)
    fx = make_array(emu.hosts, "db1", 3, level="raid5")
    spare = fx.other_volume_ids[0]
    emu.hosts.add_spare(fx.instance_id, spare)

    # WHEN it is backed up healthy
    healthy = emu.run("backup", {"array": "db1"})

    # THEN the set is the three members by their slots; the spare is not in it
    assert healthy.status == "SUCCEEDED", healthy.cause
    snaps = sets_of("db1")[healthy.output["setId"]]
    assert {s["VolumeId"]: tags_of(s)["raidsnap:member-index"] for s in snaps} == {
        vid: str(i) for i, vid in enumerate(fx.member_ids)
    }

    # WHEN md then marks the member of slot 0 faulty (still listed, no slot) and a backup runs
    emu.hosts.degrade(fx.instance_id, fx.member_ids[0])
    emu.clock.advance(BACKUP_EVERY)
    degraded = emu.run("backup", {"array": "db1"})

    # THEN a degraded set of slots 1 and 2 is taken (neither the faulty member nor the spare)
    # and the run fails with ArrayDegraded
    assert (degraded.status, degraded.error) == ("FAILED", "ArrayDegraded"), degraded.cause
    (set_id,) = set(sets_of("db1")) - {healthy.output["setId"]}
    snaps = sets_of("db1")[set_id]
    assert {s["VolumeId"]: tags_of(s)["raidsnap:member-index"] for s in snaps} == {
        fx.member_ids[1]: "1",
        fx.member_ids[2]: "2",
    }
    assert newest_complete(emu) == healthy.output["setId"]


def metric_values(printed: str, name: str) -> list[float]:
    """The values of a metric in the Embedded Metric Format documents the functions printed."""
    values: list[float] = []
    for line in printed.splitlines():
        if not line.startswith('{"_aws"'):
            continue
        document = json.loads(line)
        if name in document:
            values += [float(v) for v in document[name]]
    return values


def test_a_snapshot_retention_cannot_delete_does_not_fail_the_backup(
    emu: Emulation, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN seven complete sets taken by backups, and an AMI registered from a snapshot of the
    # oldest
    fx = make_array(emu.hosts, "db1", 3)
    oldest_set = backed_up(emu.hosts, emu.run, fx)
    for _ in range(6):
        emu.clock.advance(BACKUP_EVERY)
        backed_up(emu.hosts, emu.run, fx)
    by_index = {tags_of(s)["raidsnap:member-index"]: s for s in sets_of("db1")[oldest_set]}
    oldest = [str(by_index[i]["SnapshotId"]) for i in sorted(by_index)]
    emu.clock.advance(BACKUP_EVERY)
    ec2 = boto3.client("ec2")
    image = ec2.register_image(
        Name="golden-db1",
        RootDeviceName="/dev/xvda",
        BlockDeviceMappings=[{"DeviceName": "/dev/xvda", "Ebs": {"SnapshotId": oldest[0]}}],
    )["ImageId"]
    capsys.readouterr()

    # WHEN a backup takes an eighth set, so retention deletes the oldest
    run = emu.run("backup", {"array": "db1"})

    # THEN the run succeeds, the rest of the oldest set is gone, and the output says what could
    # not be deleted and why
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    retention = run.output["retention"]
    assert retention["deletedSets"] == [oldest_set]
    assert retention["deletedSnapshots"] == 2
    (held,) = retention["notDeleted"]
    assert held["snapshotId"] == oldest[0]
    assert held["code"] == "InvalidSnapshot.InUse"
    assert image in held["message"]
    assert any(oldest[0] in note for note in run.output["notes"])
    assert [s["SnapshotId"] for s in sets_of("db1")[oldest_set]] == [oldest[0]]
    # AND the operator's metric counts it
    assert metric_values(capsys.readouterr().out, "SnapshotsNotDeleted") == [1.0]

    # WHEN the next backup runs while the AMI still holds the snapshot, THEN it succeeds too
    emu.clock.advance(BACKUP_EVERY)
    again = emu.run("backup", {"array": "db1"})
    assert again.status == "SUCCEEDED", f"{again.error}: {again.cause}"
    assert [h["snapshotId"] for h in again.output["retention"]["notDeleted"]] == [oldest[0]]

    # WHEN the AMI is deregistered, THEN the next backup deletes the snapshot at last
    ec2.deregister_image(ImageId=image)
    emu.clock.advance(BACKUP_EVERY)
    last = emu.run("backup", {"array": "db1"})
    assert last.status == "SUCCEEDED", f"{last.error}: {last.cause}"
    assert last.output["retention"]["notDeleted"] == []
    assert oldest_set not in sets_of("db1")
