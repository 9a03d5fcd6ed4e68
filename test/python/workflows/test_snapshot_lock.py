"""Snapshot lock: an array's lock policy locks its newest sets after each backup, retention never
asks to delete a snapshot a lock holds (it reports the set as held), and a compliance lock
outlasts every retention until it ends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest

from raidsnap_emulation.harness import EXAMPLE_CONFIG, Emulation, synthesize
from raidsnap_emulation.world import (
    backed_up,
    configure_lock,
    make_array,
    make_old_set,
    sets_of,
)

DAY = 86400


def retention(emu: Emulation, keep: int) -> None:
    """The array's retention, as arrays.db1.retention in a config file would set it."""
    for fn in emu.router.functions.values():
        if "RETENTION_BY_ARRAY" in fn.environment:
            fn.environment["RETENTION_BY_ARRAY"] = json.dumps({"db1": keep})


def snapshot_ids(set_id: str) -> list[str]:
    return sorted(str(s["SnapshotId"]) for s in sets_of("db1").get(set_id, []))


def calls_on(emu: Emulation, operation: str, snapshot_ids: list[str]) -> list[Any]:
    return [
        c
        for c in emu.double.calls
        if c.operation == operation and c.params.get("SnapshotId") in snapshot_ids
    ]


def two_old_sets(emu: Emulation) -> tuple[str, str]:
    """db1 with two sets an earlier backup took, and a retention of one set."""
    fx = make_array(emu.hosts, "db1", 2)
    make_old_set(emu.hosts, fx, "db1-old-1")
    make_old_set(emu.hosts, fx, "db1-old-2")
    retention(emu, 1)
    return "db1-old-1", "db1-old-2"


def test_a_locked_set_under_retention_is_kept_whole_and_reported(emu: Emulation) -> None:
    # GIVEN two older sets, one of whose snapshots someone locked in governance mode
    locked, free = two_old_sets(emu)
    ec2 = boto3.client("ec2")
    held = snapshot_ids(locked)
    ends = ec2.lock_snapshot(SnapshotId=held[0], LockMode="governance", LockDuration=3)
    # WHEN a backup keeps only its own set
    run = emu.run("backup", {"array": "db1"})
    # THEN the free set goes, the locked one stays whole, and the output says why
    assert run.status == "SUCCEEDED", run.cause
    report = run.output["retention"]
    assert report["deletedSets"] == [free]
    assert report["heldSets"] == [
        {
            "setId": locked,
            "snapshotIds": [held[0]],
            "lockStates": ["governance"],
            "until": ends["LockExpiresOn"].isoformat(),
        }
    ]
    assert snapshot_ids(locked) == held and snapshot_ids(free) == []
    note = next(n for n in run.output["notes"] if "snapshot locks hold" in n)
    assert f"{locked} (governance until " in note
    # AND retention never asked EC2 to delete any snapshot of the held set, locked or not
    assert calls_on(emu, "DeleteSnapshot", held) == []


def test_a_compliance_lock_outlasts_retention_until_it_ends(emu: Emulation) -> None:
    locked, _ = two_old_sets(emu)
    ec2 = boto3.client("ec2")
    held = snapshot_ids(locked)
    for snapshot_id in held:
        ec2.lock_snapshot(SnapshotId=snapshot_id, LockMode="compliance", LockDuration=2)
    first = emu.run("backup", {"array": "db1"})
    assert first.status == "SUCCEEDED", first.cause
    assert [h["setId"] for h in first.output["retention"]["heldSets"]] == [locked]
    assert first.output["retention"]["heldSets"][0]["lockStates"] == ["compliance"]
    # Retention neither tried to lift the lock nor to delete through it; EC2 would refuse both.
    assert calls_on(emu, "UnlockSnapshot", held) == calls_on(emu, "DeleteSnapshot", held) == []
    assert [emu.double.lock_state(s) for s in held] == ["compliance", "compliance"]
    # WHEN the lock has ended, the next backup's retention deletes the set
    emu.clock.advance(2 * DAY + 3600)
    second = emu.run("backup", {"array": "db1"})
    assert second.status == "SUCCEEDED", second.cause
    assert locked in second.output["retention"]["deletedSets"]
    assert snapshot_ids(locked) == []


@pytest.fixture
def example() -> Iterator[Emulation]:
    """The stack synthesized with the example config: db1 locks its 2 newest sets in governance
    mode for 7 days, so its retention function may lock set snapshots for at most 7 days."""
    with Emulation(synthesize(config=EXAMPLE_CONFIG)) as emu:
        yield emu


def test_each_backup_locks_the_newest_sets_of_the_policy(example: Emulation) -> None:
    emu = example
    fx = make_array(emu.hosts, "db1", 2)
    taken = []
    for _ in range(3):
        taken.append(backed_up(emu.hosts, emu.run, fx))
        emu.clock.advance(4 * 3600)
    runs = [emu.wait(e["executionArn"]) for e in _backups(emu)]
    locks = [r.output["locks"] for r in runs]
    assert [lock["sets"] for lock in locks] == [taken[:1], taken[:2], taken[1:]]
    # Each run locks only what no lock holds yet: its own set's two snapshots.
    assert [len(lock["lockedSnapshots"]) for lock in locks] == [2, 2, 2]
    assert [lock["alreadyLocked"] for lock in locks] == [0, 2, 2]
    asked = [c.params for c in emu.double.calls if c.operation == "LockSnapshot" and c.applied]
    assert {(p["LockMode"], p["LockDuration"]) for p in asked} == {("governance", 7)}
    assert all("CoolOffPeriod" not in p for p in asked)
    for set_id in taken:
        assert {emu.double.lock_state(s) for s in snapshot_ids(set_id)} == {"governance"}
    # The newest set's lock runs 7 days from when its snapshots completed.
    newest = boto3.client("ec2").describe_locked_snapshots(SnapshotIds=snapshot_ids(taken[-1]))
    for lock in newest["Snapshots"]:
        assert lock["LockExpiresOn"] - lock["LockDurationStartTime"] == timedelta(days=7)


def test_a_compliance_policy_locks_with_its_cooling_off_and_locks_again_what_expired(
    example: Emulation,
) -> None:
    # GIVEN db1's policy: compliance for 2 days on its 2 newest sets, 6 hours to think again
    emu = example
    configure_lock(emu, "db1", mode="compliance", days=2, sets=2, coolOffHours=6)
    fx = make_array(emu.hosts, "db1", 2)
    first = backed_up(emu.hosts, emu.run, fx)
    # THEN its snapshots are locked in compliance mode with the cooling-off period asked for
    asked = [c.params for c in emu.double.calls if c.operation == "LockSnapshot" and c.applied]
    assert sorted(str(p["SnapshotId"]) for p in asked) == snapshot_ids(first)
    assert {(p["LockMode"], p["LockDuration"], p["CoolOffPeriod"]) for p in asked} == {
        ("compliance", 2, 6)
    }
    assert {emu.double.lock_state(s) for s in snapshot_ids(first)} == {"compliance-cooloff"}
    emu.clock.advance(6 * 3600 + 60)
    assert {emu.double.lock_state(s) for s in snapshot_ids(first)} == {"compliance"}
    # WHEN the lock has run out and the next backup covers that set again
    emu.clock.advance(2 * DAY)
    assert {emu.double.lock_state(s) for s in snapshot_ids(first)} == {"expired"}
    second_run = emu.run("backup", {"array": "db1"})
    # THEN the expired set is locked again along with the new one: nothing counts as held
    assert second_run.status == "SUCCEEDED", second_run.cause
    report = second_run.output["locks"]
    second = second_run.output["setId"]
    assert report["sets"] == [first, second]
    assert sorted(report["lockedSnapshots"]) == sorted(snapshot_ids(first) + snapshot_ids(second))
    assert report["alreadyLocked"] == 0
    assert {emu.double.lock_state(s) for s in snapshot_ids(first)} == {"compliance-cooloff"}


def test_a_lock_the_policy_cannot_take_fails_the_run_before_retention(example: Emulation) -> None:
    # GIVEN a policy longer than the stack's grant allows (as if the function's code or its
    # environment asked for more than the configuration says)
    emu = example
    fx = make_array(emu.hosts, "db1", 2)
    make_old_set(emu.hosts, fx, "db1-old")
    retention(emu, 1)
    configure_lock(emu, "db1", mode="compliance", days=3650, sets=1)
    run = emu.run("backup", {"array": "db1"})
    # THEN IAM refuses the lock, the run fails naming it, and retention deleted nothing
    assert (run.status, run.error) == ("FAILED", "SnapshotLockFailed"), run.cause
    assert "could not lock snapshot" in (run.cause or "")
    assert "UnauthorizedOperation" in (run.cause or "")
    assert snapshot_ids("db1-old") != []
    assert [c for c in emu.double.calls if c.operation == "DeleteSnapshot"] == []


def _backups(emu: Emulation) -> list[dict[str, Any]]:
    sfn = boto3.client("stepfunctions")
    found = sfn.list_executions(stateMachineArn=emu.state_machines["backup"])["executions"]
    return sorted(found, key=lambda e: e["startDate"])
