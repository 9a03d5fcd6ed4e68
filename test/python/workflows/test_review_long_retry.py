"""Review of issue 25: the ThrottledError Retry every Lambda Task now carries (40 attempts, 5 s
doubling to 300 s, full jitter: about 88 minutes on average, 2.9 hours at most,
lib/constructs/workflow.ts LAMBDA_RETRY) outlasts leases and timeouts that were sized for the
former one (12 attempts, at most 120 s apart: 17 minutes at most).

AWS sources relied on:
- Step Functions developer guide, "Handling errors in Step Functions workflows", Retry fields:
  MaxAttempts, BackoffRate, MaxDelaySeconds, JitterStrategy FULL: each retry waits a random time
  between 0 and IntervalSeconds x BackoffRate^(n-1), capped by MaxDelaySeconds.
- "Request throttling for the Amazon EC2 API" (EC2 Developer Guide): a request over the
  account's bucket answers RequestLimitExceeded until the bucket refills (a fleet keeps it
  empty, which is what the new Retry was made for: test_sustained_throttling.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from launches import held_launch

from raidsnap_emulation.double.base import AwsError
from raidsnap_emulation.harness import EXAMPLE_CONFIG, Emulation, synthesize
from raidsnap_emulation.world import (
    HeldStep,
    backed_up,
    launch_event,
    make_array,
)

FLEET_MINUTES = 45  # how long a fleet keeps a bucket empty (bench/fleet.py: many minutes)


@pytest.fixture(scope="module")
def example_template() -> Path:
    return synthesize(config=EXAMPLE_CONFIG)


@pytest.fixture
def example_emu(example_template: Path) -> Iterator[Emulation]:
    with Emulation(example_template) as emulation:
        yield emulation


def test_a_backups_hold_outlasts_its_snapshot_step_retried_under_throttling(
    emu: Emulation,
) -> None:
    """A backup holds its array against restores from Prepare until its snapshots are taken
    (lock.hold_for_backup; the backup's prepare.py sizes it "discovery, the freeze and half an
    hour for the rest of the snapshot step and its retries": 90 + 60 + 1800 = 1,950 s). Its
    TakeSnapshotSet, throttled by a fleet on EC2's CreateSnapshots bucket, is now retried for
    up to 2.9 hours: after 32.5 minutes the hold has run out (backup_holds drops a lease that
    ran out) while the backup has not taken its set yet, so a replace-mode restore of the same
    array is no longer refused (refuse_while_backup_holds) and replaces the members under the
    backup that is about to snapshot them. (The emulation's functions read time.time() from
    the real clock, not the virtual one, so the emulation itself never lets the lease run out:
    the test compares the lease's length with the virtual time the step took, as AWS would.)
    With the former Retry (12 attempts, at most 120 s apart) the same throttling failed the
    backup (Throttled) within its hold: no set, but no restore let in under it either."""
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    start = emu.clock.now()
    mark = len(emu.double.calls)
    until = start + timedelta(minutes=FLEET_MINUTES)
    seen: dict[str, Any] = {}

    def create_snapshots(params: dict[str, Any]) -> Any:
        now = emu.clock.now()
        if now < until:
            raise AwsError("RequestLimitExceeded", "Request limit exceeded.")
        seen["taken_after"] = (now - start).total_seconds()
        return emu.double._create_snapshots(params)

    emu.double.route("ec2", "CreateSnapshots", create_snapshots)

    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze"})

    assert "taken_after" in seen, (run.status, run.error, run.cause)
    # The hold as Prepare wrote it: leaseUntil = now + lease, expiresAt = now + 2 x lease
    (hold,) = [
        c.params["ExpressionAttributeValues"]
        for c in emu.double.calls[mark:]
        if c.operation == "UpdateItem"
        and ":lease" in (c.params.get("ExpressionAttributeValues") or {})
    ]
    seen["lease"] = int(hold[":expires"]["N"]) - int(hold[":lease"]["N"])
    assert seen["taken_after"] <= seen["lease"], (
        f"the backup's hold ran out {seen['lease']:.0f} s after it started; its snapshots were "
        f"taken {seen['taken_after']:.0f} s after (TakeSnapshotSet retried on ThrottledError): "
        "a restore of db1 in between is not refused"
    )


def test_a_launch_held_for_its_restore_is_not_abandoned_while_keep_alive_is_throttled(
    example_emu: Emulation,
) -> None:
    """A launch's recovery keeps the lifecycle action alive from KeepLaunchAlive, a Lambda Task
    that first looks at its restore (the lock table's record, DescribeExecution) and then
    records a heartbeat, every 20 minutes (a third of the hook's one-hour heartbeat timeout,
    lib/constructs/recovery.ts LIFECYCLE_HEARTBEAT). A throttled look (Step Functions'
    ThrottlingException, past the SDK's retries) raises ThrottledError before the heartbeat is
    sent, and the Task's Retry now waits up to 2.9 hours (88 minutes on average) instead of
    giving up within 17 minutes and handing over to Settle, which keeps the action alive. The
    hook's heartbeat timeout (one hour) then runs out: Auto Scaling ends the action with its
    default result, ABANDON, and terminates the instance the restore is mounting the array on
    (Amazon EC2 Auto Scaling User Guide, "Amazon EC2 Auto Scaling lifecycle hooks": the
    heartbeat timeout, RecordLifecycleActionHeartbeat, the default result on timeout)."""
    emu = example_emu
    token = "6e7f8091-1111-2222-3333-444455556666"  # noqa: S105 - a lifecycle action id
    _, new = held_launch(emu, token)
    held = HeldStep(emu, "restore_attach")
    sfn = boto3.client("stepfunctions")
    window: dict[str, Any] = {}
    looks: list[str] = []

    def describe_execution(params: dict[str, Any]) -> Any:
        now = emu.clock.now()
        actor = str(emu.double.actor or "")
        if "Recovery" in actor and "Step" in actor:
            looks.append(actor)
            # a fleet's recoveries and restores keep Step Functions' API bucket empty for
            # FLEET_MINUTES, from this recovery's first look after a heartbeat was recorded
            if "until" not in window and emu.double.lifecycle_result(token)[1]:
                window["until"] = now + timedelta(minutes=FLEET_MINUTES)
            if now < window.get("until", now):
                raise AwsError("ThrottlingException", "Rate exceeded")
            if "until" in window:
                held.release()  # the restore goes on once the throttling is over
        return emu.double._passthrough(sfn, "DescribeExecution", params)

    emu.double.route("stepfunctions", "DescribeExecution", describe_execution)
    answer = emu.invoke(
        "recovery_start",
        launch_event("analytics", new, token=token, hook="raidsnap-analytics"),
    )
    assert answer.error_type is None, answer.error_message
    run = emu.wait(str(answer.result["executionArn"]))

    assert looks, "the recovery never looked at its restore"
    result, beats = emu.double.lifecycle_result(token)
    # Seen: the recovery SUCCEEDED, and the action ended ABANDON an hour after its one
    # heartbeat, while KeepLaunchAlive was still being retried: the group terminates the
    # instance the array was just mounted on, and the operators are told the recovery
    # succeeded. (With the former Retry, 12 attempts at most 120 s apart, the same throttling
    # failed the recovery within 17 minutes and it ended FAILED: the loss was reported.)
    assert not (run.status == "SUCCEEDED" and result == "ABANDON"), (
        f"the recovery SUCCEEDED but its launch was abandoned (heartbeats at {beats}, "
        f"throttled until {window.get('until')})"
    )
    assert result != "ABANDON", (
        f"the launch was abandoned (heartbeats at {beats}, throttled until "
        f"{window.get('until')}); the recovery ended {run.status} {run.error}"
    )
