"""A backup that takes two arrays of one instance at one point in time (the input's takeWith):
one CreateSnapshots call, a complete set for each array, each restorable alone; with fsfreeze,
every array's filesystem frozen in name order around that call and thawed in reverse order, on
success and on failure; refusals change nothing and leave no hold."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from test_two_arrays import with_logs

from raidsnap.aws import snapshot_sets
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    ArrayFixture,
    HeldStep,
    make_array,
    sets_of,
    sets_table,
    tags_of,
)


def create_snapshots(emu: Emulation) -> list[Any]:
    return [c for c in emu.double.calls if c.operation == "CreateSnapshots" and c.applied]


def ran_commands(instance_id: str, document: str) -> list[tuple[str, dict[str, Any], datetime]]:
    """Each command of ``document`` the instance ran, in the order sent: its mount point, the
    JSON line it printed last and when it ended, as SSM tells them."""
    ssm = boto3.client("ssm")
    listed = ssm.list_commands(InstanceId=instance_id)["Commands"]
    out = []
    for command in sorted(listed, key=lambda c: c["RequestedDateTime"]):
        if command["DocumentName"] != document:
            continue
        ran = ssm.get_command_invocation(CommandId=command["CommandId"], InstanceId=instance_id)
        line = json.loads(ran["StandardOutputContent"].strip().splitlines()[-1])
        ended = datetime.fromisoformat(str(ran["ExecutionEndDateTime"]))
        out.append((command["Parameters"]["MountPoint"][0], line, ended))
    return out


def reported_deadline(line: dict[str, Any]) -> datetime:
    """The thawDeadline a freeze reported."""
    return datetime.strptime(line["thawDeadline"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def two(emu: Emulation) -> tuple[ArrayFixture, list[str], str]:
    fx = make_array(emu.hosts, "db1", 3, unrelated=1)
    logs, logs_uuid = with_logs(emu, fx)
    return fx, logs, logs_uuid


def test_two_arrays_taken_together_get_a_complete_set_each_from_one_call(
    emu: Emulation, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN db1 (md0, /data) and logs (md1, /logs) on one instance, beside a scratch volume
    fx, logs, logs_uuid = two(emu)
    # WHEN db1 is backed up with logs taken with it
    run = emu.run("backup", {"array": "db1", "takeWith": ["logs"]})
    # THEN one CreateSnapshots took both arrays' members and nothing else
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    (call,) = create_snapshots(emu)
    spec = call.params["InstanceSpecification"]
    assert spec["ExcludeBootVolume"] is True
    assert spec["ExcludeDataVolumeIds"] == fx.other_volume_ids
    # AND the output names each array's set; the single-array part keeps its shape
    out = run.output
    assert out["array"] == "db1" and out["memberVolumeIds"] == fx.member_ids
    (part,) = out["together"]
    assert (part["array"], part["memberVolumeIds"]) == ("logs", logs)
    assert part["retention"]["keptSets"] == [part["setId"]]
    # AND both sets are complete and restorable, with the same start time
    monkeypatch.setenv("SNAPSHOT_SETS_TABLE", sets_table())
    db1 = snapshot_sets.get_set("db1", out["setId"])
    logs_set = snapshot_sets.get_set("logs", part["setId"])
    assert db1 is not None and logs_set is not None
    assert db1.restorable and logs_set.restorable
    assert (db1.md_uuid, logs_set.md_uuid) == (fx.md_uuid, logs_uuid)
    assert [m.snapshot_id for m in db1.by_index()] == out["snapshotIds"]
    assert [m.snapshot_id for m in logs_set.by_index()] == part["snapshotIds"]
    assert db1.start_time == logs_set.start_time
    # AND no snapshot carries the group's interim tags any more
    for s in [*db1.members, *logs_set.members]:
        assert "+" not in s.tags["raidsnap:array"] and "+" not in s.tags["raidsnap:set-id"]


def test_each_set_taken_together_restores_alone(emu: Emulation) -> None:
    # GIVEN both arrays taken together
    fx, logs, _ = two(emu)
    run = emu.run("backup", {"array": "db1", "takeWith": ["logs"]})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    # WHEN logs alone is replaced in place from its latest set
    restore = emu.run("restore", {"array": "logs", "mode": "replace", "initialization": "none"})
    # THEN it comes from the set taken together, and db1 stays as it was
    assert restore.status == "SUCCEEDED", f"{restore.error}: {restore.cause}"
    assert restore.output["setId"] == run.output["together"][0]["setId"]
    arrays = emu.hosts.state(fx.instance_id).arrays
    assert arrays["/dev/md0"].members == fx.member_ids
    assert arrays["/dev/md1"].mount_point == "/logs"
    assert not set(arrays["/dev/md1"].members) & set(logs)
    # AND db1 alone restores from its own set of that run
    again = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert again.status == "SUCCEEDED", f"{again.error}: {again.cause}"
    assert again.output["setId"] == run.output["setId"]


@pytest.mark.parametrize(
    ("extra", "cause"),
    [
        ({"takeWith": ["db1"]}, "names db1 or another array twice"),
        ({"takeWith": ["logs", "logs"]}, "names db1 or another array twice"),
    ],
    ids=["itself", "twice"],
)
def test_the_array_itself_or_one_twice_is_refused_before_anything_changes(
    emu: Emulation, extra: dict[str, Any], cause: str
) -> None:
    two(emu)
    run = emu.run("backup", {"array": "db1", "takeWith": ["logs"], **extra})
    assert run.status == "FAILED"
    assert run.error == "InvalidInput", run.cause
    assert str(run.cause).startswith("takeWith: ") and cause in str(run.cause), run.cause
    assert not create_snapshots(emu)
    # (no hold is left on either array: each backs up alone at once)
    for array in ("db1", "logs"):
        alone = emu.run("backup", {"array": array})
        assert alone.status == "SUCCEEDED", f"{alone.error}: {alone.cause}"


def test_an_array_of_another_instance_is_refused_before_anything_is_held_or_sent(
    emu: Emulation,
) -> None:
    # GIVEN db1 on one instance and web on another
    fx, _, _ = two(emu)
    web = make_array(emu.hosts, "web", 2, unrelated=0)
    mark = len(emu.double.calls)
    # WHEN db1 is backed up with web
    run = emu.run("backup", {"array": "db1", "takeWith": ["web"]})
    # THEN the run fails naming takeWith, web and both instances
    assert run.status == "FAILED"
    assert run.error == "InvalidInput", run.cause
    cause = str(run.cause)
    assert cause.startswith("takeWith: web is on ") and "only arrays of one instance" in cause
    assert web.instance_id in cause and fx.instance_id in cause
    # AND nothing reached either instance and neither array was ever held
    assert not create_snapshots(emu)
    later = emu.double.calls[mark:]
    assert [c.operation for c in later if c.service == "ssm" and c.operation == "SendCommand"] == []
    assert [
        c.operation
        for c in later
        if c.service == "dynamodb" and c.operation.endswith("Item") and c.operation != "GetItem"
    ] == []
    for array in ("db1", "web"):
        alone = emu.run("backup", {"array": array})
        assert alone.status == "SUCCEEDED", f"{alone.error}: {alone.cause}"
    assert fx.instance_id


def test_a_throttled_create_snapshots_is_retried_and_takes_both_once(
    emu: Emulation, monkeypatch: pytest.MonkeyPatch
) -> None:
    fx, logs, _ = two(emu)
    emu.double.throttle("ec2", "CreateSnapshots", times=2)
    run = emu.run("backup", {"array": "db1", "takeWith": ["logs"]})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert len(create_snapshots(emu)) == 1
    monkeypatch.setenv("SNAPSHOT_SETS_TABLE", sets_table())
    for array, set_id in (
        ("db1", run.output["setId"]),
        ("logs", run.output["together"][0]["setId"]),
    ):
        current = snapshot_sets.get_set(array, set_id)
        assert current is not None and current.complete
    all_snaps = boto3.client("ec2").describe_snapshots(OwnerIds=["self"])["Snapshots"]
    assert {s["VolumeId"] for s in all_snaps} == {*fx.member_ids, *logs}


def test_a_restore_of_one_array_refuses_the_run_and_leaves_the_other_unheld(
    emu: Emulation,
) -> None:
    # GIVEN a restore of logs that holds logs' lock (db1 is held first: name order)
    fx, _, _ = two(emu)
    assert emu.run("backup", {"array": "logs"}).status == "SUCCEEDED"
    held = HeldStep(emu, "restore_check_volumes")
    restore = emu.start("restore", {"array": "logs", "mode": "replace", "initialization": "none"})
    held.wait()
    # WHEN db1 is backed up with logs
    run = emu.run("backup", {"array": "db1", "takeWith": ["logs"]})
    # THEN the run is refused, takes nothing, and db1 is not left held: it backs up alone
    # while the restore of logs still runs
    assert (run.status, run.error) == ("FAILED", "RestoreInProgress"), run.cause
    assert len(create_snapshots(emu)) == 1  # logs' own backup
    alone = emu.run("backup", {"array": "db1"})
    held.release()
    assert alone.status == "SUCCEEDED", f"{alone.error}: {alone.cause}"
    assert emu.wait(restore).status == "SUCCEEDED"
    assert fx.instance_id


def freezes_and_thaws(emu: Emulation) -> list[tuple[str, str]]:
    """(document or operation, mount point) of every freeze, thaw and CreateSnapshots, in order."""
    return [
        (
            str(c.params.get("DocumentName", c.operation)),
            str(c.params.get("Parameters", {}).get("MountPoint", [""])[0]),
        )
        for c in emu.double.calls
        if c.applied
        and (
            c.operation == "CreateSnapshots"
            or c.params.get("DocumentName") in ("raidsnap-freeze", "raidsnap-thaw")
        )
    ]


def test_fsfreeze_freezes_every_array_in_name_order_around_one_call_and_thaws_all(
    emu: Emulation,
) -> None:
    # GIVEN db1 (/data) and logs (/logs) on one instance
    fx, _, _ = two(emu)
    # WHEN db1 is backed up with logs, fsfreeze-consistent
    run = emu.run("backup", {"array": "db1", "takeWith": ["logs"], "consistency": "fsfreeze"})
    # THEN both filesystems were frozen in name order before the one call, and thawed in
    # reverse order right after it
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert freezes_and_thaws(emu) == [
        ("raidsnap-freeze", "/data"),
        ("raidsnap-freeze", "/logs"),
        ("CreateSnapshots", ""),
        ("raidsnap-thaw", "/logs"),
        ("raidsnap-thaw", "/data"),
    ]
    host = emu.hosts.state(fx.instance_id)
    assert (host.frozen, host.guards) == (set(), {})
    # AND each set says fsfreeze, in the output and on its snapshots
    (part,) = run.output["together"]
    assert (run.output["consistency"], part["consistency"]) == ("fsfreeze", "fsfreeze")
    for array, set_id in (("db1", run.output["setId"]), ("logs", part["setId"])):
        assert {tags_of(s)["raidsnap:consistency"] for s in sets_of(array)[set_id]} == {"fsfreeze"}


def test_a_failure_freezing_the_second_array_thaws_the_first_and_takes_nothing(
    emu: Emulation,
) -> None:
    # GIVEN /logs frozen by another tool
    fx, _, _ = two(emu)
    emu.hosts.freeze_by_another(fx.instance_id, "/logs")
    # WHEN db1 is backed up with logs, fsfreeze-consistent
    run = emu.run("backup", {"array": "db1", "takeWith": ["logs"], "consistency": "fsfreeze"})
    # THEN it fails naming the freeze, takes nothing, thaws /data (its own freeze), and leaves
    # the other tool's freeze of /logs as it was
    assert (run.status, run.error) == ("FAILED", "CommandFailed"), run.cause
    assert "already frozen" in str(run.cause)
    assert not create_snapshots(emu)
    host = emu.hosts.state(fx.instance_id)
    assert (host.frozen, host.guards) == ({"/logs"}, {})
    assert ("raidsnap-thaw", "/data") in freezes_and_thaws(emu)
    # AND neither array stays held
    for array in ("db1", "logs"):
        alone = emu.run("backup", {"array": array})
        assert alone.status == "SUCCEEDED", f"{alone.error}: {alone.cause}"


def test_a_failure_after_both_froze_thaws_both(emu: Emulation) -> None:
    # GIVEN CreateSnapshots refused (not throttling: the step does not retry it)
    fx, _, _ = two(emu)
    emu.double.fail("ec2", "CreateSnapshots", times=5, code="UnauthorizedOperation")
    # WHEN db1 is backed up with logs, fsfreeze-consistent
    run = emu.run("backup", {"array": "db1", "takeWith": ["logs"], "consistency": "fsfreeze"})
    # THEN the run fails and both filesystems are thawed, their guards stopped
    assert run.status == "FAILED", run.output
    host = emu.hosts.state(fx.instance_id)
    assert (host.frozen, host.guards) == (set(), {})
    thawed = {m for d, m in freezes_and_thaws(emu) if d == "raidsnap-thaw"}
    assert thawed == {"/data", "/logs"}


def snapshot_between_the_guards(emu: Emulation, instance_id: str, held: HeldStep) -> None:
    """Let the held snapshot step start after the guard of the second mount point frozen ran
    out (freeze.sh caps it to end 2 s before the first one's) but while the first one's holds."""
    (first, _, _), (_, second, _) = ran_commands(instance_id, "raidsnap-freeze")
    sent = next(c for c in emu.double.calls if c.params.get("DocumentName") == "raidsnap-freeze")
    # The first guard holds until at least its command was requested plus MaxFreezeSeconds.
    start = (
        reported_deadline(second)
        + (sent.time + timedelta(seconds=60) - reported_deadline(second)) / 2
    )
    assert first == "/data" and start > reported_deadline(second)
    emu.clock.advance((start - emu.clock.now()).total_seconds())
    held.release()


def test_each_set_is_labelled_by_its_own_freeze_guard(emu: Emulation) -> None:
    # GIVEN an fsfreeze run whose snapshot step starts after the guard of /logs (frozen second,
    # so it ends first) ran out but while the guard of /data (frozen first) still held
    fx, _, _ = two(emu)
    held = HeldStep(emu, "backup_snapshot")
    arn = emu.start("backup", {"array": "db1", "takeWith": ["logs"], "consistency": "fsfreeze"})
    held.wait()
    snapshot_between_the_guards(emu, fx.instance_id, held)
    run = emu.wait(arn)
    # THEN logs' set says crash (and why), db1's set says fsfreeze: never more than each got
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    (part,) = run.output["together"]
    assert (run.output["consistency"], part["consistency"]) == ("fsfreeze", "crash")
    assert any("guard" in n and "crash" in n for n in run.output["notes"])
    assert {tags_of(s)["raidsnap:consistency"] for s in sets_of("db1")[run.output["setId"]]} == {
        "fsfreeze"
    }
    assert {tags_of(s)["raidsnap:consistency"] for s in sets_of("logs")[part["setId"]]} == {"crash"}
    host = emu.hosts.state(fx.instance_id)
    assert (host.frozen, host.guards) == (set(), {})


def test_an_array_that_cannot_be_frozen_is_taken_crash_and_the_others_frozen(
    emu: Emulation,
) -> None:
    # GIVEN logs mounted at /srv, a directory raidsnap never freezes
    fx = make_array(emu.hosts, "db1", 3, unrelated=0)
    with_logs(emu, fx)
    emu.hosts.state(fx.instance_id).arrays["/dev/md1"].mount_point = "/srv"
    # WHEN db1 is backed up with logs, fsfreeze-consistent
    run = emu.run("backup", {"array": "db1", "takeWith": ["logs"], "consistency": "fsfreeze"})
    # THEN only /data is frozen; db1 says fsfreeze, logs crash, and the notes say why
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert freezes_and_thaws(emu) == [
        ("raidsnap-freeze", "/data"),
        ("CreateSnapshots", ""),
        ("raidsnap-thaw", "/data"),
    ]
    (part,) = run.output["together"]
    assert (run.output["consistency"], part["consistency"]) == ("fsfreeze", "crash")
    assert any(n.startswith("logs: ") and "/srv" in n for n in run.output["notes"])
