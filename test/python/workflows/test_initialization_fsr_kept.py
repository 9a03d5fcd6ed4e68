"""Initialization auto in the emulation: what the decision counts on must
be what the FSR wait then judges, so that a way chosen as ready is not given up a minute in."""

from __future__ import annotations

from typing import Any

import boto3

from raidsnap.aws import lock
from raidsnap.plan import fsr as plan_fsr
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    backed_up,
    launch_instance,
    lock_table,
    make_array,
    sets_of,
    tags_of,
)


def calls(emu: Emulation, operation: str, since: int = 0) -> list[Any]:
    return [c for c in emu.double.calls[since:] if c.operation == operation and c.applied]


def array_with_set(emu: Emulation, members: int, **array: Any) -> tuple[str, list[str], str]:
    fx = make_array(emu.hosts, "db1", members, unrelated=0, **array)
    set_id = backed_up(emu.hosts, emu.run, fx)
    snapshots = sorted(
        sets_of("db1")[set_id], key=lambda s: int(tags_of(s)["raidsnap:member-index"])
    )
    target = launch_instance("db1-copy", fx.availability_zone)
    return fx.availability_zone, [str(s["SnapshotId"]) for s in snapshots], target


def test_auto_that_counts_on_fsr_an_ended_run_left_on_does_not_fall_back_to_prewarm(
    emu: Emulation,
) -> None:
    # GIVEN FSR for every member's snapshot left on three hours ago by a restore that ended
    # (its claim is still in the table: the next restore adopts those pairs as its own)
    zone, snapshots, target = array_with_set(emu, 3)
    boto3.client("ec2").enable_fast_snapshot_restores(
        AvailabilityZones=[zone], SourceSnapshotIds=snapshots
    )
    # (a restore of this workflow that has ended: refused at once, an array it does not know)
    ended = emu.run("restore", {"array": "nosuch", "targetInstanceId": target}).arn
    lock.claim_fsr(lock_table(), "db1", ended, [plan_fsr.pair_key(s, zone) for s in snapshots])
    emu.double.clock.advance(3 * 3600)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    # auto weighs the pairs as enabled for hours, with full buckets: fast restored at once
    assert any("auto chose fsr" in n for n in run.output["notes"]), run.output["notes"]
    # THEN the run uses them as chosen, rather than waiting a credit it already has, passing
    # the one-minute limit the choice derived, and prewarming every member instead
    fallback = [n for n in run.output["notes"] if "prewarmed instead" in n]
    assert fallback == [], fallback
    assert run.output["memberInitialization"] == ["fsr", "fsr", "fsr"]
