"""A backup waits for EBS's createSnapshots event (AwaitSnapshots) instead of polling: what the
event says, what it does not, and what happens when it never comes."""

from __future__ import annotations

import time
from typing import Any

import boto3
import pytest

from raidsnap.aws import snapshot_waits
from raidsnap.workflows.backup import await_snapshots
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import configure_fast_restore, make_array, sets_of

WAIT_KEY = snapshot_waits.KEY_PREFIX


def _waits_left(emu: Emulation) -> list[str]:
    """The keys of every item of a backup waiting on its snapshots, in any table."""
    client = boto3.client("dynamodb")
    items: list[dict[str, Any]] = []
    with emu.clock.hold():
        for name in client.list_tables()["TableNames"]:
            items += client.scan(TableName=name).get("Items", [])
    keys = [str(i.get("array", {}).get("S", "")) for i in items]
    return [k for k in keys if k.startswith(WAIT_KEY)]


def _event(snapshot_ids: list[str], result: str = "succeeded") -> dict[str, Any]:
    return {
        "detail-type": await_snapshots.EVENT_DETAIL_TYPE,
        "source": "aws.ec2",
        "detail": {
            "event": "createSnapshots",
            "result": result,
            "snapshots": [
                {"snapshot_id": f"arn:aws:ec2::us-east-1:snapshot/{i}", "status": "completed"}
                for i in snapshot_ids
            ],
        },
    }


def test_a_snapshot_in_error_fails_the_run_when_ebs_says_so_not_an_hour_later(
    emu: Emulation,
) -> None:
    emu.double.snapshot_seconds = 600
    fx = make_array(emu.hosts, "db1", 3)
    emu.double.fail_snapshots(fx.member_ids[2])
    run = emu.run("backup", {"array": "db1"})
    assert run.status == "FAILED"
    assert run.error == "SnapshotFailed"
    assert fx.member_ids[2] in (run.cause or "")
    entered = run.states_entered
    assert entered[entered.index("AwaitSnapshots") + 1] == "ExplainFailure"
    assert "CheckSnapshots" not in entered
    # EBS's event came when the call was done (the other snapshots completed at 600 s), and the
    # run failed then, not after AwaitSnapshots' hour.
    snaps = boto3.client("ec2").describe_snapshots(OwnerIds=["self"])["Snapshots"]
    started = min(s["StartTime"] for s in snaps)
    assert run.ended_at is not None
    assert 600 <= (run.ended_at - started).total_seconds() < 660
    assert _waits_left(emu) == []


def test_snapshots_done_before_the_token_is_written_are_answered_by_the_first_look(
    emu: Emulation,
) -> None:
    # EBS's event may come before AwaitSnapshots wrote its token (nobody waits yet): the Task's
    # own look after writing it finds the snapshots complete and answers.
    emu.double.snapshot_seconds = 0
    make_array(emu.hosts, "db1", 3)
    run = emu.run("backup", {"array": "db1"})
    assert run.status == "SUCCEEDED", run.cause
    assert run.states_entered[-3:] == [
        "AwaitSnapshots",
        "IsMoreThanRetention",
        "ApplyRetentionLast",
    ]
    assert _waits_left(emu) == []


def test_an_event_for_snapshots_raidsnap_did_not_take_answers_no_one_and_changes_nothing(
    emu: Emulation,
) -> None:
    fx = make_array(emu.hosts, "db1", 3)
    ec2 = boto3.client("ec2")
    theirs = ec2.create_snapshot(VolumeId=fx.member_ids[0], Description="by hand")["SnapshotId"]
    mark = len(emu.double.calls)
    deliveries = emu.services.put_event(_event([theirs, "snap-0deadbeef0000000"]))
    assert [d.delivered for d in deliveries] == [True]
    assert deliveries[0].result.error_type is None
    changes = [
        c.operation
        for c in emu.double.calls[mark:]
        if not c.operation.startswith(("Describe", "Get", "List"))
    ]
    assert changes == []


def test_an_event_the_snapshots_do_not_show_yet_sends_the_run_to_its_own_looks(
    emu: Emulation,
) -> None:
    # EC2's eventual consistency: EBS's event may come before DescribeSnapshots shows every
    # snapshot completed. The function never answers the Task with a set still pending, and
    # does not rest on Lambda's two retries of the event either: it fails the Task with
    # SnapshotsNotSeenError, and the run looks by itself from then on.
    emu.double.snapshot_seconds = 600
    make_array(emu.hosts, "db1", 3)
    emu.double.on_snapshots_done = None  # EBS's event is sent by the test, early
    arn = emu.start("backup", {"array": "db1"})
    deadline = time.monotonic() + 60
    while not _waits_left(emu):
        assert time.monotonic() < deadline, "AwaitSnapshots never wrote its token down"
        time.sleep(0.2)
    with emu.clock.hold():
        snaps = boto3.client("ec2").describe_snapshots(OwnerIds=["self"])["Snapshots"]
    early = emu.services.put_event(_event([s["SnapshotId"] for s in snaps]))[0]
    assert [a.error_type for a in early.attempts] == [None]
    run = emu.wait(arn)
    assert run.status == "SUCCEEDED", run.cause
    entered = run.states_entered
    assert entered[entered.index("AwaitSnapshots") + 1] == "WaitForSnapshots"
    assert "CheckSnapshots" in entered
    assert len(sets_of("db1")) == 1
    assert _waits_left(emu) == []


@pytest.mark.parametrize("with_policy", [True, False])
def test_keep_fsr_runs_only_for_an_array_with_a_policy(emu: Emulation, with_policy: bool) -> None:
    make_array(emu.hosts, "db1", 3)
    if with_policy:
        configure_fast_restore(emu, "db1", ["us-east-1a"])
    run = emu.run("backup", {"array": "db1"})
    assert run.status == "SUCCEEDED", run.cause
    assert ("KeepFsr" in run.states_entered) is with_policy
