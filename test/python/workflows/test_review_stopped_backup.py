"""Review of fix25a: a restore ignores the hold of a backup whose execution no longer runs
(lock.refuse_while_backup_holds asks DescribeExecution), "one stopped by hand runs no state after
it". But StopExecution does not stop a Lambda invocation already under way: the backup's
TakeSnapshotSet invocation (up to its 60 s timeout) goes on after the execution is ABORTED, and
it snapshots the members and tags them a set. A restore started right after the stop (what an
operator told BackupInProgress does: stop the backup, start the restore) replaces the members
while that invocation is still taking its snapshots.

AWS sources: Step Functions API reference, StopExecution ("Stops an execution"; nothing is said
to cancel a Task's work under way, and a Lambda invocation cannot be cancelled once it runs: the
SageMaker API reference, StopPipelineExecution, says so of a Lambda step: "the Lambda function
invoked by the lambda step can't be stopped"); DescribeExecution reports ABORTED as soon as the
execution is stopped.
"""

from __future__ import annotations

import time
from typing import Any

import boto3

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import HeldStep, backed_up, make_array


def test_a_restore_does_not_run_under_the_snapshot_step_of_a_backup_just_stopped(
    emu: Emulation,
) -> None:
    # GIVEN a backup of db1 inside its snapshot step, stopped by hand
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    held = HeldStep(emu, "backup_snapshot")
    backup = emu.start("backup", {"array": "db1", "consistency": "fsfreeze"})
    held.wait()
    sfn = boto3.client("stepfunctions")
    sfn.stop_execution(executionArn=backup, cause="stopped by hand to restore")
    # Step Functions reports a stopped execution ABORTED at once; moto keeps it RUNNING until
    # the Task under way returns (the emulation differs from AWS here): answer as AWS does.

    def describe_execution(params: dict[str, Any]) -> Any:
        answer = emu.double._passthrough(sfn, "DescribeExecution", params)
        if params.get("executionArn") == backup:
            answer = {**answer, "status": "ABORTED"}
        return answer

    emu.double.route("stepfunctions", "DescribeExecution", describe_execution)
    # WHEN a restore of db1 starts at once, while the snapshot step's invocation still runs
    mark = len(emu.double.calls)
    restore = emu.start("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(
        c.operation == "CreateVolume" for c in emu.double.calls[mark:]
    ):
        time.sleep(0.2)
    replacing = any(c.operation == "CreateVolume" for c in emu.double.calls[mark:])
    held.release()
    run = emu.wait(restore)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(
        c.operation == "CreateSnapshots" for c in emu.double.calls[mark:]
    ):
        time.sleep(0.2)
    snapshots = [c for c in emu.double.calls[mark:] if c.operation == "CreateSnapshots"]
    taken = {
        str(snap.get("VolumeId")): snap.get("State")
        for c in snapshots
        for snap in boto3.client("ec2").describe_snapshots(
            Filters=[{"Name": "tag:raidsnap:set-id", "Values": ["*"]}]
        )["Snapshots"]
        if snap["StartTime"] >= c.time
    }
    # THEN the restore did not replace the members while the stopped backup's invocation was
    # about to snapshot them (seen: it created the new members, and the invocation then took
    # its snapshots)
    assert not (replacing and snapshots), (
        f"restore {run.status} replaced db1's members while the stopped backup's snapshot step "
        f"was under way; it then called CreateSnapshots {len(snapshots)} time(s): {taken}"
    )
