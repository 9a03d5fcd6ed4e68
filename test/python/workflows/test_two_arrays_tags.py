"""A further array named on its instance by md UUID (``raidsnap:array:logs=<md UUID>``) gets a
new md UUID when restored: the restore moves that tag, and only that one, to the restored array
on the instance it now runs on. A tag naming a mount point, and a read-only copy, change
nothing."""

from __future__ import annotations

import boto3
from test_two_arrays import with_logs

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import backed_up, make_array


def instance_tags(instance_id: str) -> dict[str, str]:
    found = boto3.client("ec2").describe_tags(
        Filters=[{"Name": "resource-id", "Values": [instance_id]}]
    )["Tags"]
    return {t["Key"]: t["Value"] for t in found}


def instance_tag_writes(emu: Emulation, instance_id: str, since: int) -> list[list[str]]:
    return [
        [t["Key"] for t in c.params["Tags"]]
        for c in emu.double.calls[since:]
        if c.operation in ("CreateTags", "DeleteTags")
        and c.applied
        and instance_id in c.params["Resources"]
    ]


def test_a_replace_moves_the_arrays_own_tag_and_no_other(emu: Emulation) -> None:
    # GIVEN db1 (the mark), logs by md UUID and a third array named by its mount point
    fx = make_array(emu.hosts, "db1", 3, unrelated=0)
    _, logs_uuid = with_logs(emu, fx)
    ec2 = boto3.client("ec2")
    ec2.create_tags(
        Resources=[fx.instance_id], Tags=[{"Key": "raidsnap:array:scratch", "Value": "/scratch"}]
    )
    assert emu.run("backup", {"array": "logs"}).status == "SUCCEEDED"
    backed_up(emu.hosts, emu.run, fx)
    before = instance_tags(fx.instance_id)
    mark = len(emu.double.calls)
    # WHEN logs is replaced in place
    run = emu.run("restore", {"array": "logs", "mode": "replace", "initialization": "none"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    # THEN only raidsnap:array:logs changed, to the restored array's md UUID, and the run says so
    new_uuid = emu.hosts.state(fx.instance_id).arrays["/dev/md1"].md_uuid
    assert new_uuid != logs_uuid and run.output["newMdUuid"] == new_uuid
    assert instance_tags(fx.instance_id) == before | {"raidsnap:array:logs": new_uuid}
    assert instance_tag_writes(emu, fx.instance_id, mark) == [["raidsnap:array:logs"]]
    assert any("raidsnap:array:logs=" + new_uuid in n for n in run.output["notes"])
    # AND a replace of db1 (the mark, no per-array tag) writes no tag on the instance
    mark = len(emu.double.calls)
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert instance_tag_writes(emu, fx.instance_id, mark) == []
    assert emu.run("backup", {"array": "logs"}).status == "SUCCEEDED"


def test_a_tag_naming_the_mount_point_and_a_read_only_copy_change_no_tag(emu: Emulation) -> None:
    # GIVEN logs named by its mount point
    fx = make_array(emu.hosts, "db1", 3, unrelated=0)
    with_logs(emu, fx)
    ec2 = boto3.client("ec2")
    ec2.create_tags(
        Resources=[fx.instance_id], Tags=[{"Key": "raidsnap:array:logs", "Value": "/logs"}]
    )
    assert emu.run("backup", {"array": "logs"}).status == "SUCCEEDED"
    mark = len(emu.double.calls)
    # WHEN logs is replaced in place, then a read-only copy of it is mounted next to it
    run = emu.run("restore", {"array": "logs", "mode": "replace", "initialization": "none"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    look = {
        "array": "logs",
        "mountPoint": "/mnt/logs-yesterday",
        "mdDevice": "/dev/md10",
        "readOnly": True,
        "initialization": "none",
    }
    copy = emu.run("restore", look)
    assert copy.status == "SUCCEEDED", f"{copy.error}: {copy.cause}"
    # THEN the instance's tag still names /logs, and neither run wrote a tag on the instance
    assert instance_tags(fx.instance_id)["raidsnap:array:logs"] == "/logs"
    assert instance_tag_writes(emu, fx.instance_id, mark) == []
    assert emu.run("backup", {"array": "logs"}).status == "SUCCEEDED"


def test_a_read_only_copy_leaves_a_tag_naming_the_md_uuid(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3, unrelated=0)
    _, logs_uuid = with_logs(emu, fx)
    assert emu.run("backup", {"array": "logs"}).status == "SUCCEEDED"
    look = {
        "array": "logs",
        "mountPoint": "/mnt/logs-yesterday",
        "mdDevice": "/dev/md10",
        "readOnly": True,
        "initialization": "none",
    }
    copy = emu.run("restore", look)
    assert copy.status == "SUCCEEDED", f"{copy.error}: {copy.cause}"
    assert instance_tags(fx.instance_id)["raidsnap:array:logs"] == logs_uuid
    again = emu.run("backup", {"array": "logs"})
    assert again.status == "SUCCEEDED", f"{again.error}: {again.cause}"
