"""A restored volume names its set and slot under keys of its own: a snapshot another tool takes
of it, with the volume's tags copied (Data Lifecycle Manager's CopyTags, a script), never joins
a snapshot set, so a later restore of "latest" still finds the set raidsnap took."""

from __future__ import annotations

import boto3
import pytest

from raidsnap.aws import snapshot_sets
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    backed_up,
    launch_instance,
    make_array,
    name_in_config,
    restored_volumes,
    sets_table,
    tags_of,
    terminate,
)


def test_a_snapshot_of_a_restored_volume_with_copied_tags_joins_no_set(
    emu: Emulation, monkeypatch: pytest.MonkeyPatch
) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    set_id = backed_up(emu.hosts, emu.run, fx)
    terminate(fx.instance_id)
    target = launch_instance("db1-new", fx.availability_zone, tag_array=False)
    name_in_config(emu, "db1", target)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    # GIVEN snapshots of every restored volume, carrying all of that volume's tags
    ec2 = boto3.client("ec2")
    for vol in restored_volumes(run.arn):
        copied = [{"Key": k, "Value": v} for k, v in tags_of(vol).items()]
        assert not {"raidsnap:set-id", "raidsnap:member-index"} & set(tags_of(vol))
        ec2.create_snapshot(
            VolumeId=vol["VolumeId"],
            TagSpecifications=[{"ResourceType": "snapshot", "Tags": copied}],
        )
    # WHEN the array's sets are listed and "latest" is restored again
    again = launch_instance("db1-again", fx.availability_zone, tag_array=False)
    ec2.create_tags(Resources=[again], Tags=[{"Key": "raidsnap:array", "Value": "db1-copy"}])
    second = emu.run(
        "restore", {"array": "db1", "targetInstanceId": again, "initialization": "none"}
    )
    # THEN the only set is the one raidsnap took, and it is what "latest" restores
    assert second.status == "SUCCEEDED", f"{second.error}: {second.cause}"
    assert second.output["setId"] == set_id
    monkeypatch.setenv("SNAPSHOT_SETS_TABLE", sets_table())  # as the functions have it
    assert [s.set_id for s in snapshot_sets.list_sets("db1")] == [set_id]
