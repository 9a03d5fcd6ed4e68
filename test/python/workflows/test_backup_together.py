"""A backup that takes two arrays of one instance at one point in time (the input's takeWith):
one CreateSnapshots call, a complete set for each array, each restorable alone; refusals change
nothing and leave no hold."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from test_two_arrays import with_logs

from raidsnap.aws import snapshot_sets
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import ArrayFixture, HeldStep, make_array, sets_table


def create_snapshots(emu: Emulation) -> list[Any]:
    return [c for c in emu.double.calls if c.operation == "CreateSnapshots" and c.applied]


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
        ({"consistency": "fsfreeze"}, "crash-consistent only"),
        ({"hooks": {"preSnapshot": "builtin:postgresql-checkpoint"}}, "crash-consistent only"),
        ({"takeWith": ["db1"]}, "names db1 or another array twice"),
    ],
    ids=["fsfreeze", "hooks", "itself"],
)
def test_a_freeze_hooks_or_the_array_itself_are_refused_before_anything_changes(
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


def test_an_array_of_another_instance_is_refused_and_both_holds_let_go(emu: Emulation) -> None:
    fx, _, _ = two(emu)
    make_array(emu.hosts, "web", 2, unrelated=0)
    run = emu.run("backup", {"array": "db1", "takeWith": ["web"]})
    assert run.status == "FAILED"
    assert run.error == "InvalidInput", run.cause
    assert "only arrays of one instance" in str(run.cause)
    assert not create_snapshots(emu)
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
