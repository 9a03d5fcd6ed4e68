"""How a restore initializes its volumes when nobody says (`auto`, the default), and an explicit
`fsr` that the restore-time model says cannot be usable in time: what EC2 is asked, and what the
output says."""

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
    restored_volumes,
    sets_of,
    tags_of,
)


def calls(emu: Emulation, operation: str, since: int = 0) -> list[Any]:
    return [c for c in emu.double.calls[since:] if c.operation == operation and c.applied]


def prewarmed(emu: Emulation) -> list[list[str]]:
    return [
        str(c.params["Parameters"]["VolumeIds"][0]).split(",")
        for c in calls(emu, "SendCommand")
        if str(c.params["DocumentName"]).endswith("-prewarm")
    ]


def array_with_set(emu: Emulation, members: int, **array: Any) -> tuple[str, list[str], str]:
    """(zone, the set's snapshot ids in member order, a copy target in the zone)."""
    fx = make_array(emu.hosts, "db1", members, unrelated=0, **array)
    set_id = backed_up(emu.hosts, emu.run, fx)
    snapshots = sorted(
        sets_of("db1")[set_id], key=lambda s: int(tags_of(s)["raidsnap:member-index"])
    )
    target = launch_instance("db1-copy", fx.availability_zone)
    return fx.availability_zone, [str(s["SnapshotId"]) for s in snapshots], target


def note(run: Any, text: str) -> str:
    found = [n for n in run.output["notes"] if text in n]
    assert found, run.output["notes"]
    return found[0]


def test_an_fsr_restore_of_1_tib_members_falls_back_at_once_instead_of_waiting_an_hour(
    emu: Emulation,
) -> None:
    # GIVEN 3 x 1 TiB members: FSR enabled now needs ~60 min of optimizing and then ~60 min
    # for each bucket's first credit, while reading them on an r6i.2xlarge takes ~86 min
    _, _, target = array_with_set(emu, 3, size_gib=1024)
    started, mark = emu.double.clock.now(), len(emu.double.calls)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "fsr"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    # THEN FSR is never enabled, the volumes are created at once and prewarmed
    assert calls(emu, "EnableFastSnapshotRestores", mark) == []
    created = calls(emu, "CreateVolume", mark)[0]
    assert (created.time - started).total_seconds() < 60
    assert run.output["initialization"] == "prewarm"
    assert run.output["requestedInitialization"] == "fsr"
    said = note(run, "FSR was asked for")
    assert "usable only in about 2 h 01 min" in said
    assert "prewarmed instead: full performance in about" in said


def test_auto_reads_the_members_on_an_instance_whose_bandwidth_does_it_fastest(
    emu: Emulation,
) -> None:
    # 3 x 32 GiB at 1,000 MiB/s on an r6i.2xlarge: ~82 s of reads beat ~109 s at 300 MiB/s
    _, _, target = array_with_set(emu, 3)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["requestedInitialization"] == "auto"
    assert run.output["initialization"] == "prewarm"
    assert prewarmed(emu) == [run.output["volumeIds"]]
    said = note(run, "initialization auto chose prewarm on r6i.2xlarge")
    assert "1192 MiB/s of EBS bandwidth at most, 298 MiB/s after 30 min" in said
    assert "rate at 300 MiB/s" in note(run, "the others:")


def test_auto_provisions_the_initialization_rate_where_the_instance_would_be_slower(
    emu: Emulation,
) -> None:
    # 8 x 32 GiB: reading 256 GiB through 1,192 MiB/s takes ~220 s, 300 MiB/s each ~109 s
    _, _, target = array_with_set(emu, 8)
    mark = len(emu.double.calls)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["initialization"] == "rate"
    rates = [c.params.get("VolumeInitializationRate") for c in calls(emu, "CreateVolume", mark)]
    assert rates == [300] * 8
    assert prewarmed(emu) == []
    assert all(v["VolumeInitializationRate"] == 300 for v in restored_volumes(run.arn))


def test_auto_uses_fsr_kept_enabled_and_initializes_only_the_other_members(
    emu: Emulation,
) -> None:
    # GIVEN FSR kept enabled for two of the three members' snapshots, long enough to hold credits
    zone, snapshots, target = array_with_set(emu, 3)
    ec2 = boto3.client("ec2")
    ec2.enable_fast_snapshot_restores(AvailabilityZones=[zone], SourceSnapshotIds=snapshots[:2])
    emu.double.clock.advance(3 * 3600)
    mark = len(emu.double.calls)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    # THEN those two are fast restored, the third is read on the instance, FSR stays on
    assert run.output["initialization"] == "mixed"
    assert run.output["memberInitialization"] == ["fsr", "fsr", "prewarm"]
    assert run.output["fastRestored"] == [True, True, False]
    assert prewarmed(emu) == [run.output["volumeIds"][2:]]
    assert calls(emu, "EnableFastSnapshotRestores", mark) == []
    assert calls(emu, "DisableFastSnapshotRestores", mark) == []
    assert "fsr for members 0 and 1, prewarm for member 2" in note(run, "auto chose")


def test_auto_does_not_count_on_a_pair_enabled_too_recently_to_hold_a_credit(
    emu: Emulation,
) -> None:
    # GIVEN FSR enabled for every member 10 minutes ago (by EC2's clock): enabled, but a
    # 1 TiB snapshot's bucket earns its first credit after an hour
    zone, snapshots, target = array_with_set(emu, 3, size_gib=1024)
    boto3.client("ec2").enable_fast_snapshot_restores(
        AvailabilityZones=[zone], SourceSnapshotIds=snapshots
    )
    emu.double.clock.advance(3700 + 600)  # enabling and optimizing (~1 h), then 10 min
    states = boto3.client("ec2").describe_fast_snapshot_restores()["FastSnapshotRestores"]
    assert {s["State"] for s in states} == {"enabled"}
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    # THEN it waits the 50 minutes to the credits only if nothing else is quicker: the
    # provisioned rate (1 TiB at 300 MiB/s, ~58 min) is not; FSR in ~50 min is
    assert run.output["memberInitialization"] == ["fsr", "fsr", "fsr"]
    assert run.output["fastRestored"] == [True, True, True]


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
