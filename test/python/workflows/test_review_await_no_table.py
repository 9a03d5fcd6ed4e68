"""Review: AwaitSnapshots without a lock table answers its Task with snapshots still pending.

await_snapshots.await_snapshots, with no RESTORE_LOCK_TABLE, calls SendTaskSuccess at once with
whatever check_snapshots found ("answer at once, and let the run look by itself"). But the Task
state goes on to IsMoreThanRetention, not to AreSnapshotsComplete: no later state looks again,
so the run applies retention and SUCCEEDS while its snapshots are still pending, and a snapshot
that then errors leaves a "succeeded" backup whose set is never complete. The contract (DESIGN,
Backup execution input): the run "waits until every snapshot is completed (or fails the run if
one errors)". The output of a Task with ``.waitForTaskToken`` is what SendTaskSuccess hands it
(Step Functions developer guide, "Wait for a Callback with Task Token").

The stack always gives the backup's functions the lock table (lib/raidsnap-stack.ts), so this
branch is latent: it is reached only by a BackupWorkflow built without ``restoreLock``, or an
environment that lost the variable.
"""

from __future__ import annotations

import boto3

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import make_array


def test_review_await_no_table_never_ends_a_backup_with_snapshots_pending(emu: Emulation) -> None:
    # GIVEN the check function has no lock table, and snapshots that take 10 minutes
    emu.double.snapshot_seconds = 600
    make_array(emu.hosts, "db1", 3)
    router = emu.router
    assert router is not None
    for fn in router.functions.values():
        if fn.handler.rsplit(".", 2)[-2] == "backup_check":
            fn.environment.pop("RESTORE_LOCK_TABLE", None)

    # WHEN a backup runs
    run = emu.run("backup", {"array": "db1"})

    # THEN it does not succeed before every snapshot completed
    assert run.status == "SUCCEEDED", run.cause
    assert run.output.get("snapshotIds"), run.output
    snaps = boto3.client("ec2").describe_snapshots(OwnerIds=["self"])["Snapshots"]
    states = {s["SnapshotId"]: s["State"] for s in snaps}
    started = min(s["StartTime"] for s in snaps)
    assert run.ended_at is not None
    took = (run.ended_at - started).total_seconds()
    assert took >= 600, (
        f"the backup succeeded {took:.0f} s after its snapshots started, before they could "
        f"complete (600 s); snapshot states now: {states}"
    )
