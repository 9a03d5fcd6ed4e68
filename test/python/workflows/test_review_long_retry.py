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

from datetime import timedelta
from typing import Any

from raidsnap_emulation.double.base import AwsError
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import backed_up, make_array

FLEET_MINUTES = 45  # EC2's CreateSnapshots bucket (100, 5/s) kept empty by a fleet's backups


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
    the test compares the lease's length with the virtual time the step took, as AWS would.)"""
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
