"""Backups and restores of one array exclude each other: a backup never snapshots members a
restore is replacing, and a restore never replaces members a backup is snapshotting."""

from __future__ import annotations

import boto3

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import HeldStep, backed_up, lock_table, make_array, sets_of


def _created_volumes(emu: Emulation, since: int) -> list[object]:
    return [c for c in emu.double.calls[since:] if c.operation == "CreateVolume"]


def _discovers_sent(emu: Emulation, since: int) -> list[object]:
    return [
        c
        for c in emu.double.calls[since:]
        if c.operation == "SendCommand" and c.params.get("DocumentName") == "raidsnap-discover"
    ]


def test_a_backup_while_a_restore_of_the_array_runs_ends_without_taking_a_set(
    emu: Emulation,
) -> None:
    # GIVEN a restore of db1 that holds its lock (in the middle of replacing the members)
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    held = HeldStep(emu, "restore_check_volumes")
    restore = emu.start("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    held.wait()
    sets_before = set(sets_of("db1"))
    mark = len(emu.double.calls)
    # WHEN the schedule starts a backup of db1
    backup = emu.run("backup", {"array": "db1"})
    sets_during = set(sets_of("db1"))
    sent = _discovers_sent(emu, mark)
    held.release()
    done = emu.wait(restore)
    # THEN the backup ends with RestoreInProgress naming the restore, takes no set and sends
    # nothing to the instance; the restore completes
    assert (backup.status, backup.error) == ("FAILED", "RestoreInProgress"), backup.cause
    assert restore in (backup.cause or "")
    assert sets_during == sets_before
    assert sent == []
    assert done.status == "SUCCEEDED", done.cause


def test_a_restore_while_a_backup_of_the_array_snapshots_is_refused_and_changes_nothing(
    emu: Emulation,
) -> None:
    # GIVEN a backup of db1 between its freeze and its snapshots
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    held = HeldStep(emu, "backup_snapshot")
    backup = emu.start("backup", {"array": "db1", "consistency": "fsfreeze"})
    held.wait()
    mark = len(emu.double.calls)
    # WHEN a restore of db1 starts
    refused = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    created = _created_volumes(emu, mark)
    lock = boto3.client("dynamodb").get_item(TableName=lock_table(), Key={"array": {"S": "db1"}})
    held.release()
    taken = emu.wait(backup)
    # THEN the restore is refused with BackupInProgress naming the backup, before it created,
    # detached or locked anything; the backup takes its set
    assert (refused.status, refused.error) == ("FAILED", "BackupInProgress"), refused.cause
    assert backup in (refused.cause or "")
    assert created == []
    assert "Item" not in lock
    assert taken.status == "SUCCEEDED", taken.cause
    # AND once the backup has taken its set, a restore of db1 runs
    after = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert after.status == "SUCCEEDED", after.cause


def test_a_failed_backup_lets_restores_run(emu: Emulation) -> None:
    # GIVEN a backup of db1 that failed after it started (a snapshot of a member failed)
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    emu.double.fail_snapshots(fx.member_ids[1])
    failed = emu.run("backup", {"array": "db1"})
    emu.double.heal_snapshots(fx.member_ids[1])
    assert failed.status == "FAILED"
    # WHEN a restore of db1 starts right after, THEN nothing of the failed backup holds it back
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert run.status == "SUCCEEDED", run.cause


def test_a_second_backup_does_not_end_the_first_ones_hold(emu: Emulation) -> None:
    # GIVEN backup B1 of db1 held between its discovery and its snapshots
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    held = HeldStep(emu, "backup_snapshot")
    first = emu.start("backup", {"array": "db1"})
    held.wait()
    # AND a second backup B2 of db1 that starts and ends meanwhile (a manual run beside the
    # schedule's): it holds the array for its own snapshots, then lets go of its own hold only
    second = emu.run("backup", {"array": "db1"})
    assert second.status == "SUCCEEDED", second.cause
    mark = len(emu.double.calls)
    # WHEN a replace restore of db1 starts while B1 still sits before its snapshots
    refused = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    created = _created_volumes(emu, mark)
    held.release()
    taken = emu.wait(first)
    # THEN the restore is refused with BackupInProgress naming B1 and changes nothing, and B1
    # takes its set
    assert (refused.status, refused.error) == ("FAILED", "BackupInProgress"), refused.cause
    assert first in (refused.cause or "")
    assert created == []
    assert taken.status == "SUCCEEDED", taken.cause
    # AND once both have let go, a restore of db1 runs
    after = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert after.status == "SUCCEEDED", after.cause


def test_a_backup_stopped_by_hand_does_not_hold_restores_back(emu: Emulation) -> None:
    # GIVEN a backup of db1 stopped by hand before its snapshots (StopExecution runs no state
    # after it: its failure path never lets go of its hold, which lasts hours, as long as the
    # snapshot step may be retried)
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    held = HeldStep(emu, "backup_snapshot")
    backup = emu.start("backup", {"array": "db1", "consistency": "fsfreeze"})
    held.wait()
    boto3.client("stepfunctions").stop_execution(executionArn=backup, cause="stopped by hand")
    held.release()
    stopped = emu.wait(backup)
    assert stopped.status == "ABORTED"
    # WHEN a restore of db1 starts
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    # THEN the hold of a backup that no longer runs holds nothing
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
