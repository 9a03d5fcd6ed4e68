"""Thirty days of backups every four hours with retention 7, on the emulation's clock, with what
a month brings: other tools' snapshots carrying raidsnap's tags, an array that runs degraded for
a week, a snapshot an AMI holds, and two drills preempted by a recovery.

Every run is the synthesized state machine executing on the emulation (no step is called
in-process). db1 (RAID 0 of three) is backed up every 4 hours for all 30 days (180 runs) and
carries the foreign snapshots, the AMI and the drills: its newest restorable set must never be
older than 4 hours plus one backup's duration. db2 (RAID 10 of four) loses a member for a week
(days 10 to 17); it is backed up every 4 hours from day 8 to day 19 (66 runs), which is what
the degraded week needs around it, and keeps the run time down. Even so the month takes many
minutes (rounds cost much more from the degraded week on), so it is a suite of its own:
``make sim``. No set taken while it is degraded is counted restorable (that is the point of marking them degraded), so for that week
the guarantee is that its last good set is kept and stays the one ``latest`` restores, and every
backup fails with ArrayDegraded so the operator is paged; outside that week the same 4-hour
bound holds. The sweeper's function is invoked once per round (its deployed schedule is every
15 minutes; a slower sweep only lets leftovers live longer), the RPO monitor's once per round
after the backups. The test prints the figures it asserts.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import boto3
import pytest

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    HeldStep,
    alarm_event,
    launch_instance,
    make_array,
    sets_of,
    tags_of,
)

HOUR = 3600
BACKUP_EVERY = 4 * HOUR
DAYS = 30
STEPS = DAYS * 24 * 3600 // BACKUP_EVERY
DEGRADED = range(60, 102)  # backup rounds of days 10 to 17 during which db2 runs degraded
DB2_ROUNDS = range(DEGRADED.start - 12, DEGRADED.stop + 12)  # days 8 to 19
DRILLS = {30: "db1-drill-5", 120: "db1-drill-20"}  # round -> drill host (days 5 and 20)
AMI_ROUND = 0
ACTIVE_FSR = ("enabling", "optimizing", "enabled")


def all_snapshot_ids() -> set[str]:
    pages = boto3.client("ec2").get_paginator("describe_snapshots").paginate(OwnerIds=["self"])
    return {s["SnapshotId"] for page in pages for s in page["Snapshots"]}


def forge(volume_id: str, values: dict[str, str]) -> str:
    """A snapshot another tool (or a person) took and tagged with raidsnap's tags."""
    ec2 = boto3.client("ec2")
    snapshot = ec2.create_snapshot(VolumeId=volume_id, Description="taken by another tool")
    ec2.create_tags(
        Resources=[snapshot["SnapshotId"]],
        Tags=[{"Key": k, "Value": v} for k, v in values.items()],
    )
    return str(snapshot["SnapshotId"])


def leftover_volumes() -> list[str]:
    """Volumes a raidsnap restore created that are not part of an attached array."""
    pages = (
        boto3.client("ec2")
        .get_paginator("describe_volumes")
        .paginate(Filters=[{"Name": "tag-key", "Values": ["raidsnap:restore-execution"]}])
    )
    return sorted(
        v["VolumeId"]
        for page in pages
        for v in page["Volumes"]
        if v["State"] not in ("deleting", "deleted") and not v.get("Attachments")
    )


def monitor(emu: Emulation) -> dict[str, Any]:
    report = emu.invoke("monitor_set_age", {})
    assert report.error_type is None, report.error_message
    return dict(report.result["arrays"])


class Ages:
    """The newest restorable set's age just before each backup's set became restorable: its age
    when the backup started plus the backup's duration (the worst it gets between backups)."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.durations: list[float] = []

    def add(self, age_at_start: float, duration: float) -> None:
        self.durations.append(duration)
        self.worst = max(self.worst, age_at_start + duration)


def test_thirty_days_of_backups_keep_a_fresh_restorable_set_delete_nothing_foreign_and_leak_nothing(
    emu: Emulation, capsys: pytest.CaptureFixture[str]
) -> None:
    ec2 = boto3.client("ec2")
    db1 = make_array(emu.hosts, "db1", 3)
    db2 = make_array(emu.hosts, "db2", 4, level="raid10")
    hosts = {}
    for round_, name in DRILLS.items():
        hosts[round_] = launch_instance(name, db1.availability_zone, tag_array=False)
        ec2.create_tags(
            Resources=[hosts[round_]], Tags=[{"Key": "raidsnap:array", "Value": "db1-drill"}]
        )
    start = emu.clock.now()
    foreign: set[str] = set()
    image = ""
    held_snapshot = ""
    ages = {"db1": Ages(), "db2": Ages()}
    degraded_ages: list[float] = []
    last_good = {"db1": ("", start), "db2": ("", start)}  # newest complete set, its run's start
    failures: list[str] = []
    not_deleted_reports = 0
    drills_preempted = 0

    for round_ in range(STEPS):
        # The schedule fires every 4 hours on the hour, however long the last round took.
        due = start + timedelta(seconds=round_ * BACKUP_EVERY)
        emu.clock.advance(max(0.0, (due - emu.clock.now()).total_seconds()))
        if round_ == DEGRADED.start:
            emu.hosts.degrade(db2.instance_id, db2.member_ids[2], removed=True)
        if round_ == DEGRADED.stop:
            emu.hosts.repair(db2.instance_id, db2.member_ids[2])

        runs = {}
        for fx in (db1, db2) if round_ in DB2_ROUNDS else (db1,):
            began = emu.clock.now()
            run = emu.run("backup", {"array": fx.name, "trigger": "schedule"})
            runs[fx.name] = run
            duration = emu.clock.seconds_since(began)
            # The newest restorable set is at most as old as the run that took it (its
            # snapshots start after the run does).
            age_at_start = (began - last_good[fx.name][1]).total_seconds()
            if fx is db2 and round_ in DEGRADED:
                if (run.status, run.error) != ("FAILED", "ArrayDegraded"):
                    failures.append(f"round {round_} {fx.name}: {run.status} {run.error}")
                degraded_ages.append(age_at_start + duration)
                continue
            if run.status != "SUCCEEDED":
                failures.append(f"round {round_} {fx.name}: {run.error}: {run.cause}")
                continue
            if last_good[fx.name][0] and not (fx is db2 and round_ == DEGRADED.stop):
                ages[fx.name].add(age_at_start, duration)
            last_good[fx.name] = (run.output["setId"], began)
            if fx is db1:
                not_deleted_reports += bool(run.output["retention"]["notDeleted"])
        # What the RPO monitor (and so `latest`) sees: the newest set each array could restore.
        newest = monitor(emu)
        for name in runs:
            seen = newest[name]["newestCompleteSet"]
            if seen != last_good[name][0]:
                failures.append(f"round {round_} {name}: latest is {seen}")
        if round_ % 30 == 29:
            with capsys.disabled():
                print(f"  day {(round_ + 1) // 6}: {len(failures)} failures so far", flush=True)

        if round_ == AMI_ROUND:
            # An AMI is registered from a snapshot of db1's first set: retention cannot delete it
            (first_set,) = sets_of("db1").values()  # only one set has been taken yet
            held_snapshot = str(first_set[0]["SnapshotId"])
            image = ec2.register_image(
                Name="golden-db1",
                RootDeviceName="/dev/xvda",
                BlockDeviceMappings=[
                    {"DeviceName": "/dev/xvda", "Ebs": {"SnapshotId": held_snapshot}}
                ],
            )["ImageId"]

        # Half-way to the next backup, other tools take snapshots carrying raidsnap's tags.
        emu.clock.advance(2 * HOUR)
        if round_ % 6 == 1:
            sets = sorted(sets_of("db1"))
            foreign.add(
                forge(
                    db1.other_volume_ids[0],
                    {
                        "raidsnap:array": "db1",
                        "raidsnap:set-id": sets[0],
                        "raidsnap:member-index": "1",
                        "raidsnap:member-count": "3",
                    },
                )
            )
        if round_ % 6 == 4:
            foreign.add(
                forge(
                    db1.other_volume_ids[0],
                    {
                        "raidsnap:array": "db1",
                        "raidsnap:set-id": f"db1-forged-{round_}",
                        "raidsnap:member-index": "0",
                        "raidsnap:member-count": "1",
                    },
                )
            )
        if round_ % 6 == 3:
            # A nightly image of db1 with the volumes' tags copied (after a recovery the
            # members are restored volumes and carry raidsnap's tags)
            copied = ec2.create_snapshots(
                InstanceSpecification={"InstanceId": db1.instance_id, "ExcludeBootVolume": True},
                CopyTagsFromSource="volume",
                Description="nightly image of db1",
            )["Snapshots"]
            foreign |= {s["SnapshotId"] for s in copied}

        if round_ in DRILLS:
            # A drill restoring with FSR is preempted: db1's volume fails while the drill's
            # volumes are being created, and a recovery takes the lock and restores in place.
            held = HeldStep(emu, "restore_check_volumes")
            drill = emu.start(
                "drill",
                {"array": "db1", "targetInstanceId": hosts[round_], "initialization": "fsr"},
            )
            held.wait()
            now = emu.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
            started = emu.invoke(
                "recovery_start", alarm_event(db1.instance_id, at=now, event_id=f"ev-{round_}")
            )
            assert started.result["started"], started.result
            held.release()
            recovery = emu.wait(started.result["executionArn"])
            assert recovery.status == "SUCCEEDED", recovery.cause
            assert emu.wait(drill).status == "FAILED"
            drills_preempted += 1

        found = emu.invoke("sweep", {})
        assert found.error_type is None, found.error_message

    # The month is over: the sweeper runs on its schedule once more.
    emu.clock.advance(15 * 60)
    assert emu.invoke("sweep", {}).error_type is None
    fsr_hours_total = emu.double.fsr_pair_hours()
    emu.clock.advance(24 * HOUR)
    fsr_hours_after_sweep = emu.double.fsr_pair_hours() - fsr_hours_total
    fsr_on = [
        r["SnapshotId"]
        for r in ec2.describe_fast_snapshot_restores()["FastSnapshotRestores"]
        if r["State"] in ACTIVE_FSR
    ]
    volumes_left = leftover_volumes()
    foreign_deleted = sorted(foreign - all_snapshot_ids())
    limit = {a: BACKUP_EVERY + max(ages[a].durations) for a in ages}

    with capsys.disabled():
        print()
        print(f"thirty days: {STEPS} backup rounds of db1 and db2, retention 7")
        for a, seen in ages.items():
            print(
                f"  {a}: newest restorable set at most {seen.worst / 3600:.2f} h old "
                f"(limit {limit[a] / 3600:.2f} h = 4 h + longest backup "
                f"{max(seen.durations):.0f} s; backups took {min(seen.durations):.0f}-"
                f"{max(seen.durations):.0f} s)"
            )
        print(
            f"  db2 degraded for {len(DEGRADED)} rounds: its last good set kept throughout, "
            f"then {max(degraded_ages) / 3600:.1f} h old"
        )
        print(f"  foreign snapshots: {len(foreign)} taken, {len(foreign_deleted)} deleted")
        print(f"  snapshot held by {image}: reported not deleted by {not_deleted_reports} backups")
        print(
            f"  drills preempted: {drills_preempted}; FSR pair-hours billed "
            f"{fsr_hours_total:.2f}, in the day after the last sweep "
            f"{fsr_hours_after_sweep:.2f}; FSR pairs on: {len(fsr_on)}"
        )
        print(f"  raidsnap volumes left unattached: {len(volumes_left)}")

    assert failures == []
    for a, seen in ages.items():
        assert seen.worst <= limit[a] + 6, a  # the monitor rounds ages to 0.1 minute
    assert degraded_ages and last_good["db2"][0]
    assert foreign_deleted == []
    assert held_snapshot in all_snapshot_ids()
    assert not_deleted_reports > 0
    assert drills_preempted == 2
    assert fsr_hours_after_sweep == 0.0 and fsr_on == []
    assert volumes_left == []
    assert {tags_of(s).get("raidsnap:array") for s in sets_of("db2")[last_good["db2"][0]]} == {
        "db2"
    }
