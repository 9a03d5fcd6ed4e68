"""Fast Snapshot Restore within EC2's limits: at most ten snapshots per Enable/Disable call."""

from __future__ import annotations

from typing import Any

import boto3

from raidsnap_emulation.double import FSR_MAX_SNAPSHOT_IDS, CommandOutcome
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    backed_up,
    launch_instance,
    make_array,
    restored_volumes,
    sets_of,
)


def calls(emu: Emulation, operation: str, since: int = 0) -> list[Any]:
    return [c for c in emu.double.calls[since:] if c.operation == operation]


def named(emu: Emulation, operation: str) -> list[str]:
    """Every snapshot id the applied calls of this operation named, in order."""
    return [
        str(s) for c in calls(emu, operation) if c.applied for s in c.params["SourceSnapshotIds"]
    ]


def fsr_states(snapshot_ids: list[str]) -> dict[str, str]:
    items = boto3.client("ec2").describe_fast_snapshot_restores(
        Filters=[{"Name": "snapshot-id", "Values": snapshot_ids}]
    )["FastSnapshotRestores"]
    return {i["SnapshotId"]: i["State"] for i in items}


def array_of(emu: Emulation, members: int) -> tuple[str, list[str], str]:
    """An array with one backup, and an instance in its AZ to restore onto: (zone, the set's
    snapshot ids, target)."""
    fx = make_array(emu.hosts, "db1", members, unrelated=0)
    set_id = backed_up(emu.hosts, emu.run, fx)
    snapshot_ids = sorted(str(s["SnapshotId"]) for s in sets_of("db1")[set_id])
    target = launch_instance("db1-copy", fx.availability_zone)
    return fx.availability_zone, snapshot_ids, target


# ---------------------------------------------------------------------- ten ids per call


def test_fsr_restore_of_16_members_enables_and_disables_ten_snapshots_per_call_at_most(
    emu: Emulation,
) -> None:
    zone, snapshot_ids, target = array_of(emu, 16)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "fsr"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["initialization"] == "fsr"
    # Every member's volume was fast restored, and no call was refused for its length
    created = restored_volumes(run.arn)
    assert len(created) == 16
    assert all(v["FastRestored"] for v in created)
    for operation in ("EnableFastSnapshotRestores", "DisableFastSnapshotRestores"):
        made = calls(emu, operation)
        assert made, operation
        assert all(len(c.params["SourceSnapshotIds"]) <= FSR_MAX_SNAPSHOT_IDS for c in made)
        assert not [c for c in made if c.error_code == "InvalidRequest"]
        assert sorted(named(emu, operation)) == snapshot_ids
    assert set(fsr_states(snapshot_ids).values()) <= {"disabling", "disabled"}
    assert zone == run.output["availabilityZone"]


def test_cleanup_after_a_failed_fsr_restore_of_16_members_disables_all_16(
    emu: Emulation,
) -> None:
    _, snapshot_ids, target = array_of(emu, 16)
    emu.hosts.fail_next(
        "assemble",
        CommandOutcome(status="Failed", stderr="raidsnap: UuidMismatch: refusing", exit_code=1),
    )
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "fsr"})
    assert (run.status, run.error) == ("FAILED", "CommandFailed")
    assert restored_volumes(run.arn) == []
    disables = calls(emu, "DisableFastSnapshotRestores")
    assert all(len(c.params["SourceSnapshotIds"]) <= FSR_MAX_SNAPSHOT_IDS for c in disables)
    assert set(named(emu, "DisableFastSnapshotRestores")) == set(snapshot_ids)
    assert set(fsr_states(snapshot_ids).values()) <= {"disabling", "disabled"}
