"""Fast Snapshot Restore within EC2's limits: at most ten snapshots per Enable/Disable call, and
at most the Region's quota of snapshots with FSR on at once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import boto3

from raidsnap.plan import fsr
from raidsnap_emulation.double import FSR_MAX_SNAPSHOT_IDS, CommandOutcome
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    SLOW_EBS_INSTANCE_TYPE,
    HeldStep,
    backed_up,
    launch_instance,
    make_array,
    restored_volumes,
    sets_of,
    tags_of,
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
    snapshot ids, target). The target's EBS bandwidth makes reading the members slower than
    enabling FSR for them, so a restore asked for FSR takes it."""
    fx = make_array(emu.hosts, "db1", members, unrelated=0)
    set_id = backed_up(emu.hosts, emu.run, fx)
    snapshot_ids = sorted(str(s["SnapshotId"]) for s in sets_of("db1")[set_id])
    target = launch_instance("db1-copy", fx.availability_zone, instance_type=SLOW_EBS_INSTANCE_TYPE)
    return fx.availability_zone, snapshot_ids, target


# ---------------------------------------------------------------------- ten ids per call


def test_fsr_restore_of_16_members_enables_and_disables_ten_snapshots_per_call_at_most(
    emu: Emulation,
) -> None:
    zone, snapshot_ids, target = array_of(emu, 16)
    emu.double.fsr_region_limit = 20  # an account whose quota was raised
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
    emu.double.fsr_region_limit = 20
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


# ---------------------------------------------------------------------- the Region's quota


def fsr_restore(emu: Emulation, target: str) -> Any:
    return emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "fsr"})


def assert_prewarmed_instead(emu: Emulation, run: Any, members: int) -> None:
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["requestedInitialization"] == "fsr"
    assert run.output["initialization"] == "prewarm"
    created = restored_volumes(run.arn)
    assert len(created) == members
    assert not any(v["FastRestored"] for v in created)
    prewarms = [
        c
        for c in calls(emu, "SendCommand")
        if c.applied and str(c.params["DocumentName"]).endswith("-prewarm")
    ]
    assert len(prewarms) == 1


def test_a_restore_of_6_members_in_a_region_limited_to_5_falls_back_before_enabling_anything(
    emu: Emulation,
) -> None:
    _, snapshot_ids, target = array_of(emu, 6)
    assert emu.double.fsr_region_limit == 5  # EC2's default quota
    run = fsr_restore(emu, target)
    assert_prewarmed_instead(emu, run, 6)
    assert calls(emu, "EnableFastSnapshotRestores") == []
    assert fsr_states(snapshot_ids) == {}
    (why,) = [n for n in run.output["notes"] if "FSR was not enabled" in n]
    assert "6 snapshots" in why and "5 snapshots at once" in why
    # The quota was read from Service Quotas, not assumed
    assert not [n for n in run.output["notes"] if "was assumed" in n]
    (quota,) = calls(emu, "GetServiceQuota")
    assert (quota.params["ServiceCode"], quota.params["QuotaCode"]) == ("ebs", "L-631ECBD3")
    assert quota.applied


def test_snapshots_of_others_with_fsr_on_leave_too_little_room_and_the_restore_falls_back(
    emu: Emulation,
) -> None:
    # GIVEN two snapshots that are not the set's with FSR on in another AZ of the Region
    zone, snapshot_ids, target = array_of(emu, 4)
    ec2 = boto3.client("ec2")
    others = []
    for _ in range(2):
        volume = ec2.create_volume(AvailabilityZone=zone, Size=8)["VolumeId"]
        others.append(ec2.create_snapshot(VolumeId=volume)["SnapshotId"])
    emu.double.clock.advance(emu.double.snapshot_seconds + 1)
    ec2.enable_fast_snapshot_restores(AvailabilityZones=["us-east-1b"], SourceSnapshotIds=others)
    # WHEN a set of 4 is restored with FSR, with 5 - 2 = 3 places free
    run = fsr_restore(emu, target)
    # THEN nothing is enabled, the others stay on, and the members are prewarmed
    assert_prewarmed_instead(emu, run, 4)
    enables = calls(emu, "EnableFastSnapshotRestores")
    assert [c.params["SourceSnapshotIds"] for c in enables] == [others]  # the test's own
    assert set(fsr_states(others).values()) <= {"enabling", "optimizing", "enabled"}
    assert fsr_states(snapshot_ids) == {}
    assert any("2 of them already taken" in n for n in run.output["notes"])


def test_a_quota_refusal_that_comes_anyway_turns_off_what_the_run_enabled_and_falls_back(
    emu: Emulation,
) -> None:
    # GIVEN Service Quotas reports room for 10 while EC2 enforces 5 (another restore took the
    # places between the look and the enable)
    _, snapshot_ids, target = array_of(emu, 6)
    emu.double.route(
        "service-quotas",
        "GetServiceQuota",
        lambda params: {"Quota": {"QuotaCode": params["QuotaCode"], "Value": 10.0}},
    )
    mark = len(emu.double.calls)
    run = fsr_restore(emu, target)
    # THEN EC2 refused one pair, the five it enabled are off again, and the run prewarmed
    assert_prewarmed_instead(emu, run, 6)
    (enable,) = [c for c in calls(emu, "EnableFastSnapshotRestores") if c.applied]
    assert sorted(enable.params["SourceSnapshotIds"]) == snapshot_ids
    refused = [n for n in run.output["notes"] if "ResourceLimitExceeded" in n]
    assert refused
    disabled = named(emu, "DisableFastSnapshotRestores")
    assert len(disabled) == 5
    assert set(fsr_states(snapshot_ids).values()) <= {"disabling", "disabled"}
    # AND the volumes were created only after FSR was off again
    (first_create, *_) = calls(emu, "CreateVolume", mark)
    assert calls(emu, "DisableFastSnapshotRestores")[0].time <= first_create.time


def test_without_service_quotas_the_default_of_5_is_assumed_and_said(emu: Emulation) -> None:
    _, _, target = array_of(emu, 3)
    emu.double.fail("service-quotas", "GetServiceQuota", code="ServiceException", times=10)
    run = fsr_restore(emu, target)
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["initialization"] == "fsr"
    (said,) = [n for n in run.output["notes"] if "was assumed" in n]
    assert "ServiceException" in said and "default of 5" in said


# ---------------------------------------------------------------------- an enable that fails


def test_an_enable_that_fails_on_ec2s_side_falls_back_at_the_next_look_not_at_the_limit(
    emu: Emulation,
) -> None:
    # GIVEN a set whose second snapshot's FSR enable fails 30 s after EC2 accepted it
    _, snapshot_ids, target = array_of(emu, 3)
    emu.double.fail_fsr_async(snapshot_ids[1], after_seconds=30)
    # WHEN it is restored with FSR and an hour to wait for it
    run = emu.run(
        "restore",
        {
            "array": "db1",
            "targetInstanceId": target,
            "initialization": "fsr",
            "fsrTimeoutSeconds": 3600,
        },
    )
    # THEN the run prewarms instead, and says which snapshot failed and why
    assert_prewarmed_instead(emu, run, 3)
    (why,) = [n for n in run.output["notes"] if snapshot_ids[1] in n]
    assert "Server.InternalError" in why
    # AND it gave up at its first look after the failure, not after the hour
    (enable,) = [c for c in calls(emu, "EnableFastSnapshotRestores") if c.applied]
    failed_at = enable.time + timedelta(seconds=30)
    disable = calls(emu, "DisableFastSnapshotRestores")[0]
    assert run.states_entered.count("CheckFsr") == 1
    assert (disable.time - failed_at).total_seconds() <= fsr.MAX_WAIT_SECONDS
    # AND the pairs it enabled are off
    assert set(fsr_states(snapshot_ids).values()) <= {"disabling", "disabled"}


# ---------------------------------------------------------------------- volume creation credits


def test_a_member_created_without_a_credit_is_prewarmed_and_the_output_says_which(
    emu: Emulation,
) -> None:
    # GIVEN member 0's snapshot has FSR on already (not the run's)
    zone, _, target = array_of(emu, 3)
    (set_id,) = sets_of("db1")
    by_index = {int(tags_of(s)["raidsnap:member-index"]): s for s in sets_of("db1")[set_id]}
    first = str(by_index[0]["SnapshotId"])
    ec2 = boto3.client("ec2")
    ec2.enable_fast_snapshot_restores(AvailabilityZones=[zone], SourceSnapshotIds=[first])
    emu.double.clock.advance(3 * 3600)
    # WHEN it is restored with FSR, and someone spends member 0's credits just before the
    # restore creates its volumes
    held = HeldStep(emu, "restore_create_volumes")
    arn = emu.start(
        "restore", {"array": "db1", "targetInstanceId": target, "initialization": "fsr"}
    )
    held.wait()
    spent = []
    for _ in range(11):  # a 32 GiB snapshot's bucket holds at most 10
        spent.append(ec2.create_volume(AvailabilityZone=zone, SnapshotId=first)["VolumeId"])
    emu.double.clock.advance(emu.double.volume_seconds + 1)
    views = ec2.describe_volumes(VolumeIds=spent)["Volumes"]
    assert not all(v["FastRestored"] for v in views)  # the bucket is empty
    held.release()
    run = emu.wait(arn)
    # THEN members 1 and 2 are fast restored (their fresh buckets got a credit first), member
    # 0 is not and only it is prewarmed, and the output says which member used what
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["initialization"] == "fsr"
    ids = run.output["volumeIds"]
    assert run.output["fastRestored"] == [False, True, True]
    restored = {v["VolumeId"]: v for v in restored_volumes(run.arn)}
    assert [restored[i]["FastRestored"] for i in ids] == [False, True, True]
    assert run.output["memberInitialization"] == ["prewarm", "fsr", "fsr"]
    prewarms = [
        c.params["Parameters"]
        for c in calls(emu, "SendCommand")
        if c.applied and str(c.params["DocumentName"]).endswith("-prewarm")
    ]
    assert [p["VolumeIds"] for p in prewarms] == [[ids[0]]]
    assert any("members 0 were" in n and "prewarmed" in n for n in run.output["notes"])


def test_fresh_pairs_are_waited_for_until_each_has_a_volume_creation_credit(
    emu: Emulation,
) -> None:
    # The bucket of a newly enabled pair starts empty: a restore that created its volumes as
    # soon as FSR was enabled would get none of them fast restored
    _, _, target = array_of(emu, 3)
    run = fsr_restore(emu, target)
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["fastRestored"] == [True, True, True]
    assert run.output["memberInitialization"] == ["fsr", "fsr", "fsr"]
    assert not [
        c
        for c in calls(emu, "SendCommand")
        if c.applied and str(c.params["DocumentName"]).endswith("-prewarm")
    ]


def test_fsr_already_enabled_for_every_member_is_used_at_once(emu: Emulation) -> None:
    # GIVEN FSR kept enabled (by its owner) for every member's snapshot in the target's AZ, long
    # enough for their credit buckets to hold some
    zone, _, target = array_of(emu, 3)
    (set_id,) = sets_of("db1")
    snapshots = [str(s["SnapshotId"]) for s in sets_of("db1")[set_id]]
    boto3.client("ec2").enable_fast_snapshot_restores(
        AvailabilityZones=[zone], SourceSnapshotIds=snapshots
    )
    emu.double.clock.advance(3 * 3600)
    # WHEN db1 is restored with FSR
    started, mark = emu.double.clock.now(), len(emu.double.calls)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "fsr"})
    # THEN the volumes are created from it without a first wait, and it stays enabled
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["fastRestored"] == [True, True, True]
    looks = [i for i in emu.router.invocations if i.module == "restore_fsr"]
    assert len(looks) == 1
    created = next(
        c for c in emu.double.calls[mark:] if c.operation == "CreateVolume" and c.applied
    )
    assert (created.time - started).total_seconds() < 60
