"""The fastRestore policy: Fast Snapshot Restore kept enabled on an array's newest complete sets
in the chosen zones (README "Keeping FSR enabled"), within the Region's quota, and never
disabled by a restore or the sweeper while the policy keeps it."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import boto3
import pytest

from raidsnap.aws import lock
from raidsnap.plan import fsr as plan_fsr
from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation, Execution
from raidsnap_emulation.world import (
    ArrayFixture,
    HeldStep,
    configure_fast_restore,
    launch_instance,
    lock_table,
    make_array,
    restored_volumes,
    sets_of,
)

ZONE = "us-east-1a"


def fsr_items(snapshot_ids: list[str]) -> list[dict[str, Any]]:
    return list(
        boto3.client("ec2").describe_fast_snapshot_restores(
            Filters=[{"Name": "snapshot-id", "Values": snapshot_ids}]
        )["FastSnapshotRestores"]
    )


def states(snapshot_ids: list[str], zone: str = ZONE) -> dict[str, str]:
    return {
        i["SnapshotId"]: i["State"]
        for i in fsr_items(snapshot_ids)
        if i["AvailabilityZone"] == zone
    }


def fsr_calls(emu: Emulation, since: int = 0) -> list[Any]:
    return [
        c
        for c in emu.double.calls[since:]
        if c.operation in ("EnableFastSnapshotRestores", "DisableFastSnapshotRestores")
        and c.applied
    ]


def backup(emu: Emulation) -> Execution:
    run = emu.run("backup", {"array": "db1"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    return run


def kept_array(emu: Emulation, members: int = 3, limit: int = 10) -> ArrayFixture:
    fx = make_array(emu.hosts, "db1", members, unrelated=0)
    emu.double.fsr_region_limit = limit
    configure_fast_restore(emu, "db1", [ZONE], sets=1)
    return fx


def test_a_backup_keeps_fsr_on_its_new_set_in_the_zone_and_turns_off_the_set_it_replaced(
    emu: Emulation,
) -> None:
    # GIVEN db1 with a fastRestore policy: one set, in us-east-1a
    kept_array(emu, limit=6)  # 3 kept + 3 of the new set while it is enabled
    # WHEN a backup runs
    first = backup(emu)
    ids = first.output["snapshotIds"]
    # THEN its set has FSR enabled in that zone, and in no other
    assert states(ids) == dict.fromkeys(ids, "enabled")
    assert {i["AvailabilityZone"] for i in fsr_items(ids)} == {ZONE}
    report = first.output["fastRestore"]
    assert report["status"] == "kept", report
    assert (report["setId"], report["keptSets"], report["retiredSets"]) == (
        first.output["setId"],
        [first.output["setId"]],
        [],
    )
    # WHEN the next backup runs
    emu.clock.advance(4 * 3600)
    second = backup(emu)
    new = second.output["snapshotIds"]
    # THEN the new set is enabled, the old one turned off, and only once the new one was
    # enabled (and held a volume creation credit: its bucket starts empty)
    assert states(new) == dict.fromkeys(new, "enabled")
    assert set(states(ids).values()) <= {"disabling", "disabled"}
    report = second.output["fastRestore"]
    assert (report["keptSets"], report["retiredSets"]) == (
        [second.output["setId"]],
        [first.output["setId"]],
    )
    (off,) = [c for c in fsr_calls(emu) if c.operation == "DisableFastSnapshotRestores"]
    assert sorted(off.params["SourceSnapshotIds"]) == sorted(ids)
    enabled_at = max(i["EnabledTime"] for i in fsr_items(new))
    credit = timedelta(seconds=plan_fsr.credit_seconds(32))
    assert off.time >= enabled_at + credit


def test_a_restore_in_the_kept_zone_finds_fsr_ready_at_its_first_look_and_leaves_it_on(
    emu: Emulation,
) -> None:
    # GIVEN db1's newest set kept with FSR in us-east-1a, and an instance there
    fx = kept_array(emu)
    ids = backup(emu).output["snapshotIds"]
    target = launch_instance("db1-copy", fx.availability_zone)
    mark = len(emu.double.calls)
    # WHEN a restore with FSR runs there
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "fsr"})
    # THEN it found FSR ready at its first look (no wait, no enable of its own), its volumes
    # were fast restored, and FSR stays enabled
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["initialization"] == "fsr"
    assert "WaitForFsr" not in run.states_entered
    assert all(v["FastRestored"] for v in restored_volumes(run.arn))
    assert fsr_calls(emu, mark) == []
    assert states(ids) == dict.fromkeys(ids, "enabled")
    assert any("already enabled" in n and "leaves it enabled" in n for n in run.output["notes"])


def test_when_the_quota_has_no_room_the_new_set_gets_no_fsr_and_the_previous_keeps_it(
    emu: Emulation, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a Region that allows 5 snapshots with FSR, and db1's 3-member set kept
    kept_array(emu, limit=5)
    first = backup(emu).output["snapshotIds"]
    emu.clock.advance(4 * 3600)
    mark = len(emu.double.calls)
    capsys.readouterr()
    # WHEN the next backup's set would need 3 more (6 > 5)
    run = backup(emu)
    # THEN nothing is enabled for it, the previous set keeps its FSR, and the output warns
    new = run.output["snapshotIds"]
    assert fsr_calls(emu, mark) == []
    assert states(new) == {}
    assert states(first) == dict.fromkeys(first, "enabled")
    report = run.output["fastRestore"]
    assert report["status"] == "skipped"
    assert "5 snapshots at once" in report["warning"], report
    assert "nothing was enabled" in report["warning"]
    # AND the metric the alarm watches says so
    metrics = [
        json.loads(line)
        for line in capsys.readouterr().out.splitlines()
        if '"_aws"' in line and "FastRestoreNotKept" in line
    ]
    values = [m["FastRestoreNotKept"] for m in metrics]
    assert [v[0] if isinstance(v, list) else v for v in values] == [1.0]


def test_an_array_without_a_policy_keeps_no_fsr(emu: Emulation) -> None:
    make_array(emu.hosts, "db1", 3)
    run = backup(emu)
    assert "fastRestore" not in run.output
    assert fsr_calls(emu) == []


def test_the_sweeper_never_disables_the_pairs_the_policy_keeps(emu: Emulation) -> None:
    # GIVEN the policy keeps db1's set on, and an ended restore's claim names the same pairs
    # (a restore that enabled them itself, then ended without turning them off)
    kept_array(emu)
    ids = backup(emu).output["snapshotIds"]
    ended = "arn:aws:states:us-east-1:123456789012:execution:raidsnap-restore:gone"
    lock.claim_fsr(lock_table(), "db1", ended, [plan_fsr.pair_key(s, ZONE) for s in ids])
    # WHEN the sweeper runs
    swept = emu.invoke("sweep", {})
    # THEN it drops the ended run's claim and leaves the pairs on
    assert swept.error_type is None, swept.error_message
    assert swept.result["fsrDisabled"] == []
    assert ended in swept.result["claimsDropped"]
    assert states(ids) == dict.fromkeys(ids, "enabled")


@pytest.mark.parametrize("fails", [False, True], ids=["succeeds", "fails"])
def test_a_restore_that_enabled_the_pairs_before_the_policy_took_them_leaves_them_on(
    emu: Emulation, fails: bool
) -> None:
    # GIVEN a backup of db1 held before its fastRestore step, and an FSR restore of the new set
    # that enabled the pairs itself and is held before it creates its volumes
    fx = kept_array(emu)
    keep = HeldStep(emu, "backup_keep_fsr")
    backing_up = emu.start("backup", {"array": "db1"})
    keep.wait()
    target = launch_instance("db1-copy", fx.availability_zone)
    create = HeldStep(emu, "restore_create_volumes")
    if fails:
        emu.hosts.fail_next(
            "assemble",
            CommandOutcome(status="Failed", stderr="raidsnap: UuidMismatch: refusing", exit_code=1),
        )
    restoring = emu.start(
        "restore", {"array": "db1", "targetInstanceId": target, "initialization": "fsr"}
    )
    create.wait()
    # WHEN the policy takes the pairs over, and then the restore ends
    keep.release()
    kept = emu.wait(backing_up)
    assert kept.status == "SUCCEEDED", f"{kept.error}: {kept.cause}"
    assert kept.output["fastRestore"]["status"] == "kept"
    create.release()
    run = emu.wait(restoring)
    # THEN the restore (or its cleanup) leaves on the pairs the policy keeps
    assert run.status == ("FAILED" if fails else "SUCCEEDED"), f"{run.error}: {run.cause}"
    ids = kept.output["snapshotIds"]
    assert states(ids) == dict.fromkeys(ids, "enabled")


def test_removing_the_policy_turns_its_fsr_off_at_the_next_backup(emu: Emulation) -> None:
    kept_array(emu)
    first = backup(emu)
    configure_fast_restore(emu, "db1", [ZONE], sets=0)
    emu.clock.advance(3600)
    second = backup(emu)
    report = second.output["fastRestore"]
    assert (report["status"], report["retiredSets"]) == ("removed", [first.output["setId"]])
    ids = first.output["snapshotIds"]
    assert set(states(ids).values()) <= {"disabling", "disabled"}
    assert states(second.output["snapshotIds"]) == {}


def test_the_sweeper_turns_off_what_a_removed_policy_kept(emu: Emulation) -> None:
    kept_array(emu)
    first = backup(emu)
    configure_fast_restore(emu, "db1", [ZONE], sets=0)
    swept = emu.invoke("sweep", {})
    assert swept.error_type is None, swept.error_message
    assert swept.result["keptSetsDisabled"] == [first.output["setId"]]
    assert set(states(first.output["snapshotIds"]).values()) <= {"disabling", "disabled"}


def test_retention_deleting_the_replaced_set_leaves_nothing_on_and_nothing_claimed(
    emu: Emulation,
) -> None:
    # GIVEN db1 keeps one set, and retention keeps one set too
    kept_array(emu)
    for fn in emu.router.functions.values():
        if "RETENTION_BY_ARRAY" in fn.environment:
            fn.environment["RETENTION_BY_ARRAY"] = json.dumps({"db1": 1})
    first = backup(emu)
    emu.clock.advance(3600)
    # WHEN the next backup's retention deletes the kept set (which turns its FSR off: EBS User
    # Guide, "Configure fast snapshot restore") before the policy enables the new one
    second = backup(emu)
    # THEN the run succeeds, the new set is kept, and the deleted one left the claim
    assert second.output["retention"]["deletedSets"] == [first.output["setId"]]
    report = second.output["fastRestore"]
    assert (report["status"], report["keptSets"]) == ("kept", [second.output["setId"]])
    assert report["retiredSets"] == [first.output["setId"]]
    assert set(states(first.output["snapshotIds"]).values()) <= {"disabling", "disabled"}


def test_zones_of_another_region_keep_nothing_and_warn(emu: Emulation) -> None:
    make_array(emu.hosts, "db1", 3)
    configure_fast_restore(emu, "db1", ["eu-west-1a"], sets=1)
    run = backup(emu)
    report = run.output["fastRestore"]
    assert report["status"] == "skipped"
    assert "not in this Region" in report["warning"]
    assert fsr_calls(emu) == []


def test_a_new_set_whose_fsr_keeps_failing_is_given_up_and_the_previous_keeps_its_own(
    emu: Emulation,
) -> None:
    # GIVEN db1's set kept, and a next backup whose new set's FSR fails on EC2's side each time
    kept_array(emu)
    first = backup(emu).output["snapshotIds"]
    emu.clock.advance(3600)
    keep = HeldStep(emu, "backup_keep_fsr")
    running = emu.start("backup", {"array": "db1"})
    keep.wait()
    newest = max(sets_of("db1").items(), key=lambda kv: kv[0])[1]
    failing = str(newest[0]["SnapshotId"])
    emu.double.fail_fsr_async(failing, after_seconds=30)
    keep.release()
    run = emu.wait(running)
    # THEN the run ends, having enabled it again twice, with the new set's FSR off and the
    # previous set's still on
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    report = run.output["fastRestore"]
    assert report["status"] == "failed", report
    assert "stopped after it was enabled" in report["warning"]
    new = run.output["snapshotIds"]
    assert failing in new
    assert set(states(new).values()) <= {"disabling", "disabled"}
    assert states(first) == dict.fromkeys(first, "enabled")
    enables = [
        c
        for c in fsr_calls(emu)
        if c.operation == "EnableFastSnapshotRestores" and failing in c.params["SourceSnapshotIds"]
    ]
    assert len(enables) == 3


def test_a_backup_whose_set_a_later_one_already_replaced_enables_nothing(emu: Emulation) -> None:
    # GIVEN a backup held before its fastRestore step, and a later backup that keeps its own set
    kept_array(emu)
    keep = HeldStep(emu, "backup_keep_fsr")
    earlier = emu.start("backup", {"array": "db1"})
    keep.wait()
    emu.clock.advance(3600)
    later = backup(emu)
    assert later.output["fastRestore"]["status"] == "kept"
    # WHEN the earlier one goes on
    keep.release()
    run = emu.wait(earlier)
    # THEN it enables nothing for its older set, and the later set keeps its FSR
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    report = run.output["fastRestore"]
    assert (report["status"], report["keptSets"]) == ("superseded", [later.output["setId"]])
    assert states(run.output["snapshotIds"]) == {}
    new = later.output["snapshotIds"]
    assert states(new) == dict.fromkeys(new, "enabled")
