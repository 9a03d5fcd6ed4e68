"""A restore whose set cannot be had as it is says what would make it whole: members deleted
into the Recycle Bin (restore them from it), or a set table that was lost or is new (record the
sets again with `raidsnap sets adopt`). Nothing changes before it says so."""

from __future__ import annotations

import boto3
from test_restore import changes

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    ArrayFixture,
    backed_up,
    make_array,
    sets_of,
    sets_table,
)

REPLACE = {"array": "db1", "mode": "replace", "initialization": "none"}


def member_snapshot(set_id: str, index: int) -> str:
    (found,) = [
        s
        for s in sets_of("db1")[set_id]
        if {t["Key"]: t["Value"] for t in s["Tags"]}.get("raidsnap:member-index") == str(index)  # type: ignore[attr-defined]
    ]
    return str(found["SnapshotId"])


def two_sets(emu: Emulation) -> tuple[ArrayFixture, str, str]:
    fx = make_array(emu.hosts, "db1", 3)
    older = backed_up(emu.hosts, emu.run, fx)
    emu.clock.advance(3600)
    newer = backed_up(emu.hosts, emu.run, fx)
    return fx, older, newer


def test_a_set_with_members_in_the_recycle_bin_names_them_and_how_to_get_them_back(
    emu: Emulation,
) -> None:
    # GIVEN a Recycle Bin retention rule, and one member of the newest set deleted by hand
    _, _, newer = two_sets(emu)
    emu.double.retain_deleted_snapshots(days=7)
    ec2 = boto3.client("ec2")
    gone = member_snapshot(newer, 1)
    ec2.delete_snapshot(SnapshotId=gone)
    # WHEN that set is restored
    mark = len(emu.double.calls)
    run = emu.run("restore", {**REPLACE, "setId": newer})
    # THEN the run names the snapshot and the command that brings it back, and changed nothing
    assert (run.status, run.error) == ("FAILED", "SnapshotsInRecycleBin"), run.cause
    cause = run.cause or ""
    assert f"lacks members [1]: their snapshots ['{gone}'] were deleted into the Recycle Bin" in (
        cause
    )
    command = f"aws ec2 restore-snapshot-from-recycle-bin --region us-east-1 --snapshot-id {gone}"
    assert command in cause
    assert cause.endswith("then restore again. Nothing was changed")
    assert changes(emu, mark) == []
    # AND once the snapshot is restored from the bin, as the cause says, the set restores
    ec2.restore_snapshot_from_recycle_bin(SnapshotId=gone)
    again = emu.run("restore", {**REPLACE, "setId": newer})
    assert again.status == "SUCCEEDED", again.cause


def test_latest_says_so_when_the_only_sets_wait_in_the_recycle_bin(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    only = backed_up(emu.hosts, emu.run, fx)
    emu.double.retain_deleted_snapshots(days=7)
    ec2 = boto3.client("ec2")
    for index in (0, 1):
        ec2.delete_snapshot(SnapshotId=member_snapshot(only, index))
    run = emu.run("restore", REPLACE)
    assert (run.status, run.error) == ("FAILED", "SnapshotsInRecycleBin"), run.cause
    assert f"set {only} of db1 lacks members [0, 1]" in (run.cause or "")


def test_latest_restores_the_newest_whole_set_and_says_a_newer_one_waits_in_the_bin(
    emu: Emulation,
) -> None:
    _, older, newer = two_sets(emu)
    emu.double.retain_deleted_snapshots(days=7)
    gone = member_snapshot(newer, 2)
    boto3.client("ec2").delete_snapshot(SnapshotId=gone)
    run = emu.run("restore", REPLACE)
    assert run.status == "SUCCEEDED", run.cause
    assert run.output["setId"] == older
    (note,) = [n for n in run.output["notes"] if "Recycle Bin" in n]
    assert note.startswith(f"restored {older}, the newest complete set; set {newer} of db1")
    assert note.endswith(f"then restore setId {newer} to have the newer data")


def test_a_set_the_table_does_not_record_names_sets_adopt(emu: Emulation) -> None:
    # GIVEN the set table lost its record of the array's set
    fx = make_array(emu.hosts, "db1", 2)
    set_id = backed_up(emu.hosts, emu.run, fx)
    boto3.client("dynamodb").delete_item(
        TableName=sets_table(), Key={"array": {"S": "db1"}, "setId": {"S": set_id}}
    )
    # WHEN the set is restored by its id, or as latest
    by_id = emu.run("restore", {**REPLACE, "setId": set_id})
    latest = emu.run("restore", REPLACE)
    # THEN both name the fix, and blame no one
    assert (by_id.status, by_id.error) == ("FAILED", "IncompleteSnapshotSet")
    assert "is not in raidsnap's set table" in (by_id.cause or "")
    assert "`raidsnap sets adopt db1`" in (by_id.cause or "")
    assert "another tool" not in (by_id.cause or "")
    assert (latest.status, latest.error) == ("FAILED", "SnapshotSetNotFound")
    assert "2 snapshots tagged with db1 are in no set raidsnap recorded" in (latest.cause or "")
    assert "`raidsnap sets adopt db1`" in (latest.cause or "")
