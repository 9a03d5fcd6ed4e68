"""The backup workflow, as synthesized, on the emulation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import boto3
import pytest

from raidsnap.workflows.backup.snapshot import SNAPSHOT_POLL_MAX_SECONDS, SNAPSHOT_POLL_MIN_SECONDS
from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import HeldStep, make_array, make_old_set, sets_of, tags_of

REPO = Path(__file__).resolve().parents[3]

MUTATING_EC2 = {"CreateSnapshots", "CreateSnapshot", "CreateTags", "DeleteSnapshot", "CreateVolume"}


def ec2_changes(emu: Emulation, since: int = 0) -> list[str]:
    return [
        c.operation
        for c in emu.double.calls[since:]
        if c.service == "ec2" and c.applied and c.operation in MUTATING_EC2
    ]


@pytest.mark.parametrize("members", [3, 8])
def test_backup_snapshots_exactly_the_members_and_tags_the_set(
    emu: Emulation, members: int
) -> None:
    # GIVEN an instance with a boot volume, N members and an unrelated data volume
    fx = make_array(emu.hosts, "db1", members, unrelated=1)

    # WHEN a backup runs
    run = emu.run("backup", {"array": "db1"})

    # THEN the set holds exactly the members, one snapshot per slot, every tag right
    assert run.status == "SUCCEEDED", run.cause
    sets = sets_of("db1")
    assert list(sets) == [run.output["setId"]]
    snaps = sets[run.output["setId"]]
    assert sorted(s["VolumeId"] for s in snaps) == sorted(fx.member_ids)
    for snap in snaps:
        tags = tags_of(snap)
        index = int(tags["raidsnap:member-index"])
        assert snap["VolumeId"] == fx.member_ids[index]
        assert tags["raidsnap:array"] == "db1"
        assert tags["raidsnap:set-id"] == run.output["setId"]
        assert tags["raidsnap:member-count"] == str(members)
        assert tags["raidsnap:source-volume"] == fx.member_ids[index]
        assert tags["raidsnap:md-uuid"] == fx.md_uuid
        assert tags["raidsnap:md-level"] == "raid0"
        assert tags["raidsnap:md-chunk-kib"] == "512"
        assert tags["raidsnap:fs-type"] == "xfs"
        assert tags["raidsnap:mount-point"] == "/data"
        assert tags["raidsnap:volume-type"] == "gp3"
        assert tags["raidsnap:iops"] == "16000"
        assert tags["raidsnap:throughput"] == "1000"
        assert tags["raidsnap:consistency"] == "crash"
        assert snap["State"] == "completed"
    by_id = {s["SnapshotId"]: s["VolumeId"] for s in snaps}
    assert [by_id[s] for s in run.output["snapshotIds"]] == fx.member_ids
    assert run.output["discovery"] == "discovery"
    # AND one CreateSnapshots call made the whole set (one point in time)
    creates = [c for c in emu.double.calls if c.operation == "CreateSnapshots" and c.applied]
    assert len(creates) == 1
    spec = creates[0].params["InstanceSpecification"]
    assert spec["ExcludeBootVolume"] is True
    assert spec["ExcludeDataVolumeIds"] == fx.other_volume_ids


def test_backup_transitions_do_not_grow_with_members(template: object) -> None:
    counts = {}
    for members in (2, 8):
        with Emulation() as emu:
            make_array(emu.hosts, "db1", members)
            run = emu.run("backup", {"array": "db1"})
            assert run.status == "SUCCEEDED", run.cause
            counts[members] = run.transitions
    assert counts[2] == counts[8]


def test_a_crash_consistent_backup_enters_only_states_that_decide_or_work(
    emu: Emulation,
) -> None:
    # Each state entered is a billed transition (AWS Step Functions pricing). A backup with
    # discovery, no freeze, no fastRestore policy and no copies: no state that only reshapes
    # data (Start, Discovery: Prepare's ResultSelector does it), no Choice whose answer is known
    # (IsThawNeeded without a freeze, IsDiscoveryRunning: a discovery Prepare skipped waits 0 s),
    # no look at snapshots still pending (AwaitSnapshots waits for EBS's event, however long
    # they take), no KeepFsr or copy step for an array that has neither.
    emu.double.snapshot_seconds = 180
    make_array(emu.hosts, "db1", 3)
    run = emu.run("backup", {"array": "db1"})
    assert run.status == "SUCCEEDED", run.cause
    assert run.states_entered == [
        "Prepare",
        "WaitForDiscovery",
        "ResolveMembers",
        "IsDiscoveryDone",
        "TakeSnapshotSet",
        "AwaitSnapshots",
        "IsMoreThanRetention",
        "ApplyRetentionLast",
    ]
    # The README's worked example prices a backup at this many transitions.
    example = json.loads((REPO / "docs" / "costs" / "prices.json").read_text())["example"]
    assert run.transitions == example["backupTransitions"]
    # It ended when EBS said the snapshots were done: 180 s after they started.
    started = min(
        s["StartTime"]
        for s in boto3.client("ec2").describe_snapshots(OwnerIds=["self"])["Snapshots"]
    )
    assert run.ended_at is not None
    assert 180 <= (run.ended_at - started).total_seconds() < 240


def test_snapshot_in_error_fails_the_run_and_retention_deletes_nothing(emu: Emulation) -> None:
    # GIVEN seven complete sets already (the retention default), so a success would delete one
    fx = make_array(emu.hosts, "db1", 3)
    for i in range(7):
        make_old_set(emu.hosts, fx, f"db1-old-{i}")
    before = {s for s in sets_of("db1")}
    mark = len(emu.double.calls)
    # WHEN one member's snapshot ends in error
    emu.double.fail_snapshots(fx.member_ids[1])
    run = emu.run("backup", {"array": "db1"})

    # THEN the run fails with a named error that says which member
    assert run.status == "FAILED"
    assert run.error == "SnapshotFailed"
    assert fx.member_ids[1] in (run.cause or "")
    assert "member 1" in (run.cause or "")
    # AND nothing was deleted: every earlier set is still there
    assert "DeleteSnapshot" not in ec2_changes(emu, mark)
    assert before <= set(sets_of("db1"))


def test_throttled_create_snapshots_still_yields_exactly_one_set(emu: Emulation) -> None:
    make_array(emu.hosts, "db1", 3)
    emu.double.throttle("ec2", "CreateSnapshots", times=3)
    run = emu.run("backup", {"array": "db1"})
    assert run.status == "SUCCEEDED", run.cause
    assert list(sets_of("db1")) == [run.output["setId"]]
    assert len(sets_of("db1")[run.output["setId"]]) == 3


def test_retried_step_after_create_snapshots_succeeded_takes_no_second_set(emu: Emulation) -> None:
    # EC2 takes the set, but the answer is lost: the step fails and the workflow retries it.
    make_array(emu.hosts, "db1", 3)
    emu.double.fail("ec2", "CreateSnapshots", code="RequestLimitExceeded", after_success=True)
    run = emu.run("backup", {"array": "db1"})
    assert run.status == "SUCCEEDED", run.cause
    applied = [c for c in emu.double.calls if c.operation == "CreateSnapshots" and c.applied]
    assert len(applied) == 1
    assert len(sets_of("db1")) == 1
    assert len(sets_of("db1")[run.output["setId"]]) == 3


def test_throttling_on_every_ec2_call_still_succeeds(emu: Emulation) -> None:
    make_array(emu.hosts, "db1", 3)
    emu.double.throttle_everything("ec2", times_each=2)
    emu.double.throttle_everything("ssm", times_each=2)
    run = emu.run("backup", {"array": "db1"})
    assert run.status == "SUCCEEDED", run.cause
    assert len(sets_of("db1")) == 1


def test_a_snapshot_seconds_earlier_is_waited_out_not_fatal(emu: Emulation) -> None:
    # GIVEN an operator snapshotted a member by hand a moment ago (EC2 allows one snapshot of
    # a volume every 15 seconds or so)
    fx = make_array(emu.hosts, "db1", 3)
    boto3.client("ec2").create_snapshot(VolumeId=fx.member_ids[0], Description="by hand")
    # WHEN the backup runs right away
    run = emu.run("backup", {"array": "db1"})
    # THEN CreateSnapshots met the rate limit, the workflow backed off, and one set exists
    assert run.status == "SUCCEEDED", run.cause
    limited = [
        c for c in emu.double.calls if c.error_code == "SnapshotCreationPerVolumeRateExceeded"
    ]
    assert limited
    assert len(sets_of("db1")) == 1


def test_retention_keeps_the_newest_complete_sets_and_old_incomplete_ones_go(
    emu: Emulation,
) -> None:
    # GIVEN 11 earlier sets, oldest first: 8 complete, and 3 incomplete ones (one missing a
    # member and one with a snapshot in error, both old; one missing a member, recent)
    fx = make_array(emu.hosts, "db1", 3)
    plan = [
        ("c0", None, False),
        ("broken-old", 1, False),
        ("c1", None, False),
        ("failed-old", None, True),
        ("c2", None, False),
        ("c3", None, False),
        ("c4", None, False),
        ("c5", None, False),
        ("c6", None, False),
        ("c7", None, False),
        ("partial-new", 2, False),
    ]
    for set_id, missing, failing in plan:
        make_old_set(emu.hosts, fx, set_id, missing_index=missing, failing=failing)

    # WHEN a backup completes (retention 7 by default)
    run = emu.run("backup", {"array": "db1"})

    # THEN the newest 7 complete sets remain (the new one and c2..c7), c0 and c1 go, the old
    # incomplete sets go, and the recent incomplete set stays (a backup may still own it)
    assert run.status == "SUCCEEDED", run.cause
    remaining = set(sets_of("db1"))
    assert remaining == {run.output["setId"], "c2", "c3", "c4", "c5", "c6", "c7", "partial-new"}
    assert set(run.output["retention"]["deletedSets"]) == {"c0", "c1", "broken-old", "failed-old"}


def test_discovery_falls_back_to_volume_tags_when_the_agent_is_offline(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3, tag_members=True)
    emu.double.set_agent(fx.instance_id, online=False)
    run = emu.run("backup", {"array": "db1"})
    assert run.status == "SUCCEEDED", run.cause
    assert run.output["discovery"] == "tags"
    assert any("SSM agent is not online" in n for n in run.output["notes"])
    snaps = sets_of("db1")[run.output["setId"]]
    assert sorted(s["VolumeId"] for s in snaps) == sorted(fx.member_ids)
    # md facts are unknown without discovery, so those tags are absent rather than guessed
    assert all("raidsnap:md-uuid" not in tags_of(s) for s in snaps)


def test_discovery_falls_back_to_volume_tags_when_the_instance_reports_nothing(
    emu: Emulation,
) -> None:
    fx = make_array(emu.hosts, "db1", 3, tag_members=True)
    emu.hosts.fail_next("discover", CommandOutcome(status="Success", stdout=""))
    run = emu.run("backup", {"array": "db1"})
    assert run.status == "SUCCEEDED", run.cause
    assert run.output["discovery"] == "tags"
    assert any("no report" in n for n in run.output["notes"])
    assert sorted(s["VolumeId"] for s in sets_of("db1")[run.output["setId"]]) == sorted(
        fx.member_ids
    )


def test_without_discovery_or_member_tags_the_run_fails_with_array_not_found(
    emu: Emulation,
) -> None:
    fx = make_array(emu.hosts, "db1", 3, tag_members=False)
    emu.double.set_agent(fx.instance_id, online=False)
    mark = len(emu.double.calls)
    run = emu.run("backup", {"array": "db1"})
    assert (run.status, run.error) == ("FAILED", "ArrayNotFound")
    assert "tagged raidsnap:array=db1" in (run.cause or "")
    assert ec2_changes(emu, mark) == []


def test_fsfreeze_freezes_before_and_thaws_right_after_the_snapshot(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3)
    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze"})
    assert run.status == "SUCCEEDED", run.cause
    order = [
        c.params.get("DocumentName", c.operation)
        for c in emu.double.calls
        if c.applied and c.operation in ("SendCommand", "CreateSnapshots")
    ]
    assert order == ["raidsnap-discover", "raidsnap-freeze", "CreateSnapshots", "raidsnap-thaw"]
    assert emu.hosts.state(fx.instance_id).frozen == set()
    snaps = sets_of("db1")[run.output["setId"]]
    assert {tags_of(s)["raidsnap:consistency"] for s in snaps} == {"fsfreeze"}


def test_a_failed_freeze_fails_with_command_failed_and_its_stderr(emu: Emulation) -> None:
    make_array(emu.hosts, "db1", 3)
    emu.hosts.fail_next(
        "freeze",
        CommandOutcome(
            status="Failed", stderr="fsfreeze: /data: Operation not supported", exit_code=1
        ),
    )
    mark = len(emu.double.calls)
    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze"})
    assert (run.status, run.error) == ("FAILED", "CommandFailed")
    assert "Operation not supported" in (run.cause or "")
    assert ec2_changes(emu, mark) == []
    # AND the failure path thawed anyway: a freeze that failed half-way may have frozen
    thaws = [c for c in emu.double.calls if c.params.get("DocumentName") == "raidsnap-thaw"]
    assert len(thaws) == 1


def test_unknown_array_fails_with_array_not_found(emu: Emulation) -> None:
    make_array(emu.hosts, "db1", 3)
    run = emu.run("backup", {"array": "db2"})
    assert (run.status, run.error) == ("FAILED", "ArrayNotFound")
    assert "db2" in (run.cause or "")


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({}, "array"),
        ({"array": "no spaces allowed"}, "array"),
        ({"array": ""}, "array"),
        ({"array": 7}, "array"),
        ({"array": "db1", "consistency": "app"}, "consistency"),
        ({"array": "db1", "trigger": "cron"}, "trigger"),
        ({"array": "db1", "retention": 3}, "retention"),
        (["db1"], "input"),
    ],
)
def test_bad_input_fails_with_invalid_input_naming_the_field_and_changes_nothing(
    emu: Emulation, payload: object, field: str
) -> None:
    make_array(emu.hosts, "db1", 3)
    mark = len(emu.double.calls)
    run = emu.run("backup", payload)
    assert (run.status, run.error) == ("FAILED", "InvalidInput")
    assert (run.cause or "").startswith(f"{field}:")
    assert [
        c
        for c in emu.double.calls[mark:]
        if c.applied
        and c.service in ("ec2", "ssm")
        and not c.operation.startswith(("Describe", "Get", "List"))
    ] == []


def test_fsfreeze_of_an_array_mounted_at_a_system_directory_takes_a_crash_consistent_set(
    emu: Emulation,
) -> None:
    # GIVEN an array mounted at /srv itself (freezing it would freeze what /srv holds)
    make_array(emu.hosts, "db1", 3, mount_point="/srv")
    # WHEN an fsfreeze backup runs
    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze"})
    # THEN no freeze is sent, the set is taken crash-consistent, and the output says why
    assert run.status == "SUCCEEDED", run.cause
    assert run.output["consistency"] == "crash"
    assert any("/srv" in note for note in run.output["notes"])
    sent = [c.params.get("DocumentName") for c in emu.double.calls if c.operation == "SendCommand"]
    assert "raidsnap-freeze" not in sent
    snaps = sets_of("db1")[run.output["setId"]]
    assert {tags_of(s)["raidsnap:consistency"] for s in snaps} == {"crash"}


def test_a_failed_backup_never_thaws_a_freeze_it_does_not_hold(emu: Emulation) -> None:
    # GIVEN the array's filesystem is frozen by someone else (another tool, or a backup still
    # running) when an fsfreeze backup starts
    fx = make_array(emu.hosts, "db1", 3)
    emu.hosts.freeze_by_another(fx.instance_id, "/data")
    mark = len(emu.double.calls)

    # WHEN the backup's freeze finds it frozen and the run fails
    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze"})

    # THEN it fails naming the other freeze, takes no snapshot, and the other freeze still holds
    assert (run.status, run.error) == ("FAILED", "CommandFailed")
    assert "AlreadyFrozen" in (run.cause or "") or "already frozen" in (run.cause or "")
    assert ec2_changes(emu, mark) == []
    assert emu.hosts.state(fx.instance_id).frozen == {"/data"}


def test_a_set_whose_snapshots_started_after_the_freeze_guard_ran_out_is_labelled_crash(
    emu: Emulation,
) -> None:
    # GIVEN an fsfreeze backup whose snapshot step starts 218 s after the freeze (as when
    # CreateSnapshots is retried through SnapshotCreationPerVolumeRateExceeded), while the
    # freeze guard thaws after 60 s
    fx = make_array(emu.hosts, "db1", 3)
    held = HeldStep(emu, "backup_snapshot")
    arn = emu.start("backup", {"array": "db1", "consistency": "fsfreeze"})
    held.wait()
    (freeze,) = [c for c in emu.double.calls if c.params.get("DocumentName") == "raidsnap-freeze"]
    emu.clock.advance(218 - (emu.clock.now() - freeze.time).total_seconds())
    held.release()
    run = emu.wait(arn)

    # THEN the set is taken, but labelled crash-consistent, and the run says why
    assert run.status == "SUCCEEDED", run.cause
    assert run.output["consistency"] == "crash"
    assert any("guard" in note and "crash" in note for note in run.output["notes"])
    snaps = sets_of("db1")[run.output["setId"]]
    assert {tags_of(s)["raidsnap:consistency"] for s in snaps} == {"crash"}
    assert emu.hosts.state(fx.instance_id).frozen == set()


@pytest.mark.parametrize("snapshot_seconds", [5000, 7200, 20000])
def test_without_ebs_event_the_backup_looks_by_itself_after_an_hour_no_more_than_needed(
    emu: Emulation, snapshot_seconds: int
) -> None:
    # EventBridge delivers AWS services' events on a best-effort basis: with none, AwaitSnapshots
    # times out after its hour and the run looks by itself. Each look is three billed state
    # transitions (Wait, Task, Choice): the hour counts as waited, so each look waits what the
    # last one's progress says is left (at most SNAPSHOT_POLL_MAX_SECONDS), not half of it.
    emu.double.on_snapshots_done = None
    emu.clock.task_timeouts = True
    emu.double.snapshot_seconds = snapshot_seconds
    make_array(emu.hosts, "db1", 3)
    run = emu.run("backup", {"array": "db1"})
    assert run.status == "SUCCEEDED", run.cause
    entered = run.states_entered
    assert entered[entered.index("AwaitSnapshots") + 1] == "AwaitedTooLong"
    first_look = 3600 + SNAPSHOT_POLL_MIN_SECONDS
    needed = 1 + math.ceil((snapshot_seconds - first_look) / SNAPSHOT_POLL_MAX_SECONDS)
    assert entered.count("CheckSnapshots") == needed
    assert entered[-1] == "ApplyRetentionLast"
