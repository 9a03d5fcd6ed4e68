"""The fastRestore policy takes over the pairs that are on when its backup claims the new set
(``before``): a backup that gives the set up leaves them on (keep_fsr._give_up: "what this run
turned on, not what was on before it claimed it"), and a restore leaves on what it found on
(README: "Pairs that are on when a restore starts are someone else's"). A pair an operator
enabled by hand, with no raidsnap restore claiming it, is someone else's too: retiring the set
must leave it on as well."""

from __future__ import annotations

import boto3

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    HeldStep,
    configure_fast_restore,
    make_array,
    sets_of,
)

ZONE = "us-east-1a"


def _states(snapshot_ids: list[str]) -> dict[str, str]:
    items = boto3.client("ec2").describe_fast_snapshot_restores(
        Filters=[{"Name": "snapshot-id", "Values": snapshot_ids}]
    )["FastSnapshotRestores"]
    return {i["SnapshotId"]: i["State"] for i in items if i["AvailabilityZone"] == ZONE}


def test_retiring_a_kept_set_leaves_on_the_fsr_an_operator_enabled_on_it(emu: Emulation) -> None:
    # GIVEN db1 keeps one set with FSR, and its backup is held before its fastRestore step
    make_array(emu.hosts, "db1", 3, unrelated=0)
    emu.double.fsr_region_limit = 10
    configure_fast_restore(emu, "db1", [ZONE], sets=1)
    keep = HeldStep(emu, "backup_keep_fsr")
    first = emu.start("backup", {"array": "db1"})
    keep.wait()
    # AND an operator enables FSR by hand for one snapshot of the new set in that zone (for a
    # copy they mean to make there, whatever raidsnap does)
    (members,) = sets_of("db1").values()
    theirs = str(members[0]["SnapshotId"])
    boto3.client("ec2").enable_fast_snapshot_restores(
        AvailabilityZones=[ZONE], SourceSnapshotIds=[theirs]
    )
    keep.release()
    kept = emu.wait(first)
    assert kept.status == "SUCCEEDED", f"{kept.error}: {kept.cause}"
    assert kept.output["fastRestore"]["status"] == "kept"
    # WHEN the next backup's set replaces it
    emu.clock.advance(4 * 3600)
    second = emu.run("backup", {"array": "db1"})
    assert second.status == "SUCCEEDED", f"{second.error}: {second.cause}"
    assert second.output["fastRestore"]["retiredSets"] == [kept.output["setId"]]
    # THEN the policy turned off what it enabled, and left the operator's pair on
    ids = kept.output["snapshotIds"]
    after = _states(ids)
    assert {after[s] for s in ids if s != theirs} <= {"disabling", "disabled"}
    assert after[theirs] == "enabled", after
