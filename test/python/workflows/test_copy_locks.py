"""Snapshot lock in the places sets are copied to: the stack there locks the newest copied sets
with its own lock policy for the array (a source never decides how long copies elsewhere are
locked), and its retention never asks to delete a copy a lock holds, reporting the set as held."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raidsnap_emulation.harness import (
    COPIES_CONFIG,
    COPIES_LOCKED_DESTINATION_CONFIG,
    Emulation,
    Peer,
    synthesize,
)
from raidsnap_emulation.world import make_array, tags_of

WEST = "us-west-2"


@pytest.fixture(scope="module")
def copies_template() -> Path:
    return synthesize(config=COPIES_CONFIG)


@pytest.fixture(scope="module")
def locking_template() -> Path:
    """A stack whose config gives db1 a lock policy (governance, 7 days, the 2 newest sets) and
    keeps 2 sets per array (config/copies-locked-destination.example.yaml)."""
    return synthesize(config=COPIES_LOCKED_DESTINATION_CONFIG)


@pytest.fixture
def two(copies_template: Path, locking_template: Path) -> Iterator[tuple[Emulation, Peer]]:
    """db1's stack in us-east-1 (it copies db1 to us-west-2) and the stack in us-west-2,
    deployed with db1's lock policy, keeping 2 copies."""
    with Emulation(copies_template) as emu:
        yield emu, emu.deploy(WEST, template=locking_template)


def copies_there(west: Peer) -> dict[str, list[str]]:
    with west.inside():
        snaps = west.client("ec2").describe_snapshots(
            OwnerIds=["self"], Filters=[{"Name": "tag:raidsnap:array", "Values": ["db1"]}]
        )["Snapshots"]
    out: dict[str, list[str]] = {}
    for s in snaps:
        out.setdefault(tags_of(s)["raidsnap:set-id"], []).append(str(s["SnapshotId"]))
    return out


def locked_there(west: Peer, snapshot_ids: list[str]) -> dict[str, str]:
    with west.inside():
        answer = west.client("ec2").describe_locked_snapshots(SnapshotIds=snapshot_ids)
    return {str(s["SnapshotId"]): str(s["LockState"]) for s in answer["Snapshots"]}


def copy_run(west: Peer, set_id: str) -> Any:
    (run,) = [
        r for r in (west.wait(a) for a in west.executions("copy")) if r.input["setId"] == set_id
    ]
    return run


def test_copies_are_locked_there_and_retention_there_keeps_a_locked_copy_whole(
    two: tuple[Emulation, Peer],
) -> None:
    emu, west = two
    fx = make_array(emu.hosts, "db1", 2)
    # GIVEN three backups of db1, each copied to us-west-2, where 2 copied sets are kept and the
    # stack's lock policy locks the 2 newest
    set_ids = []
    for _ in range(3):
        run = emu.run("backup", {"array": fx.name})
        assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
        set_ids.append(run.output["setId"])
        emu.clock.advance(3600)
    there = copies_there(west)
    # THEN the newest copies there are locked by the copy runs, in governance mode
    newest = there[set_ids[2]] + there[set_ids[1]]
    assert set(locked_there(west, newest).values()) == {"governance"}
    last = copy_run(west, set_ids[2])
    assert last.status == "SUCCEEDED", f"{last.error}: {last.cause}"
    assert last.output["locks"]["sets"] == [set_ids[1], set_ids[2]]
    # AND the oldest copy, locked while it was among the newest, is past the retention there:
    # it is kept whole and reported as held, and no delete of it was asked of EC2
    oldest = there[set_ids[0]]
    assert len(oldest) == 2
    kept = last.output["retention"]
    assert kept["deletedSets"] == []
    assert [h["setId"] for h in kept["heldSets"]] == [set_ids[0]]
    asked = [
        c
        for c in emu.double.calls
        if c.operation == "DeleteSnapshot" and c.params.get("SnapshotId") in oldest
    ]
    assert asked == []
