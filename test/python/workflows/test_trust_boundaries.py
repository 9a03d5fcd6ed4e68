"""Whoever may start a restore, or tag an instance or a snapshot, must not reach beyond the array
they name: not onto another array's instance, not onto an instance nobody named for the array,
not to a mount point where a filesystem runs as root, and a tag alone never moves an array."""

from __future__ import annotations

import boto3
import pytest
from test_attach_mode import changes

from raidsnap.aws import homes
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.iam.authorizer import AccessDeniedError
from raidsnap_emulation.world import (
    backed_up,
    configure_recovery,
    create_topics,
    instance_tags,
    launch_instance,
    lock_table,
    make_array,
    name_in_config,
    sets_of,
    sets_table,
    terminate,
)

PER_BOOT = "/var/lib/cloud/scripts/per-boot"


def test_a_restore_never_acts_on_another_arrays_instance(emu: Emulation) -> None:
    # GIVEN db1 live on its instance, and a team's own array "evil" with a set of its own
    db1 = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, db1)
    evil = make_array(emu.hosts, "evil", 2, unrelated=0)
    backed_up(emu.hosts, emu.run, evil)
    fstab = dict(emu.hosts.state(db1.instance_id).fstab)
    mark = len(emu.double.calls)
    # WHEN evil's owner restores evil onto db1's instance, at a directory cloud-init runs
    run = emu.run(
        "restore",
        {
            "array": "evil",
            "targetInstanceId": db1.instance_id,
            "mountPoint": PER_BOOT,
            "initialization": "none",
        },
    )
    # THEN it is refused on the target, and nothing changed anywhere
    assert (run.status, run.error) == ("FAILED", "InvalidInput"), run.cause
    assert "targetInstanceId" in run.cause and "db1" in run.cause
    assert "another array's" in run.cause
    assert changes(emu, mark) == []
    after = emu.hosts.state(db1.instance_id)
    assert sorted(after.arrays) == ["/dev/md0"]
    assert dict(after.fstab) == fstab
    assert instance_tags(db1.instance_id)["raidsnap:array"] == "db1"


def test_a_restore_never_takes_an_untagged_instance_nobody_named(emu: Emulation) -> None:
    # GIVEN evil's instance is gone, and another team's untagged "payments" instance runs
    evil = make_array(emu.hosts, "evil", 2, unrelated=0)
    backed_up(emu.hosts, emu.run, evil)
    terminate(evil.instance_id)
    payments = launch_instance("payments", "us-east-1a", tag_array=False)
    mark = len(emu.double.calls)
    # WHEN evil is restored onto it
    run = emu.run(
        "restore", {"array": "evil", "targetInstanceId": payments, "initialization": "none"}
    )
    # THEN it is refused: the instance is not tagged, and nobody named it for evil
    assert (run.status, run.error) == ("FAILED", "InvalidInput"), run.cause
    assert "targetInstanceId" in run.cause and "carries no raidsnap:array" in run.cause
    assert changes(emu, mark) == []
    assert "raidsnap:array" not in instance_tags(payments)


def test_a_mount_point_outside_the_allowed_places_is_refused(emu: Emulation) -> None:
    # GIVEN evil moved to a new instance of its own (tagged for it)
    evil = make_array(emu.hosts, "evil", 2, unrelated=0)
    backed_up(emu.hosts, emu.run, evil)
    terminate(evil.instance_id)
    new = launch_instance("evil", "us-east-1a")
    mark = len(emu.double.calls)
    # WHEN the restore asks for a directory whose files run as root at each boot
    run = emu.run(
        "restore",
        {
            "array": "evil",
            "targetInstanceId": new,
            "mountPoint": PER_BOOT,
            "initialization": "none",
        },
    )
    # THEN it is refused on the mount point, naming the allowed places, and nothing changed
    assert (run.status, run.error) == ("FAILED", "InvalidInput"), run.cause
    assert "mountPoint" in run.cause and "/data, /mnt, /srv, /opt/evil" in run.cause
    assert changes(emu, mark) == []
    # AND under an allowed place it is restored, and the new instance becomes evil's
    ok = emu.run(
        "restore",
        {
            "array": "evil",
            "targetInstanceId": new,
            "mountPoint": "/srv/evil",
            "initialization": "none",
        },
    )
    assert ok.status == "SUCCEEDED", f"{ok.error}: {ok.cause}"
    assert f"{new} is now recorded as evil's instance" in ok.output["notes"]
    emu.clock.advance(60)
    backup = emu.run("backup", {"array": "evil"})
    assert backup.status == "SUCCEEDED", f"{backup.error}: {backup.cause}"
    assert backup.output["memberVolumeIds"] == ok.output["volumeIds"]


def test_a_squatters_tag_does_not_block_the_arrays_backups(emu: Emulation) -> None:
    # GIVEN db1 backed up from its instance, and someone tags their own instance db1
    db1 = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, db1)
    squatter = launch_instance("db1", "us-east-1a")
    # WHEN the next backup runs
    emu.clock.advance(3600)
    run = emu.run("backup", {"array": "db1"})
    # THEN it backs up db1's own instance, and says which other instance carries the tag
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["memberVolumeIds"] == db1.member_ids
    assert any(squatter in n and "raidsnap move db1" in n for n in run.output["notes"])


def test_while_the_arrays_instance_is_stopped_a_squatter_is_neither_backed_up_nor_restored_onto(
    emu: Emulation,
) -> None:
    # GIVEN db1 backed up, then its instance stopped; another team's array tagged db1
    db1 = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, db1)
    ec2 = boto3.client("ec2")
    ec2.stop_instances(InstanceIds=[db1.instance_id])
    other = make_array(emu.hosts, "other", 2, unrelated=0)
    ec2.create_tags(Resources=[other.instance_id], Tags=[{"Key": "raidsnap:array", "Value": "db1"}])
    sets_before = sets_of("db1")
    mark = len(emu.double.calls)
    # WHEN a backup of db1 runs
    emu.clock.advance(3600)
    run = emu.run("backup", {"array": "db1"})
    # THEN it is refused by name, naming both instances and the command that confirms a move
    assert (run.status, run.error) == ("FAILED", "ArrayInstanceChanged"), run.cause
    assert other.instance_id in run.cause and db1.instance_id in run.cause
    assert f"raidsnap move db1 {other.instance_id}" in run.cause
    assert changes(emu, mark) == [] and sets_of("db1") == sets_before
    # AND a restore of latest onto "db1's instance" is refused the same way
    restore = emu.run("restore", {"array": "db1", "initialization": "none"})
    assert (restore.status, restore.error) == ("FAILED", "ArrayInstanceChanged"), restore.cause
    assert changes(emu, mark) == []
    assert sorted(emu.hosts.state(other.instance_id).arrays) == ["/dev/md0"]
    # AND once an operator confirms the move (what `raidsnap move db1 <id>` records), the
    # backup follows the array there
    homes.record_move(lock_table(), "db1", other.instance_id, "operator test")
    emu.clock.advance(60)
    moved = emu.run("backup", {"array": "db1"})
    assert moved.status == "SUCCEEDED", f"{moved.error}: {moved.cause}"
    assert moved.output["memberVolumeIds"] == other.member_ids


def test_the_restore_role_cannot_tag_another_arrays_instance_even_if_its_code_tried(
    emu: Emulation,
) -> None:
    # GIVEN db1's instance (tagged db1) and an untagged instance
    db1 = make_array(emu.hosts, "db1", 1, unrelated=0)
    untagged = launch_instance("spare", "us-east-1a", tag_array=False)
    attach = next(p for p in emu.iam.stack.principals if p.startswith("RestoreRestoreAttach"))
    params = {"Tags": [{"Key": "raidsnap:array", "Value": "evil"}]}
    # WHEN the attach step's role tags db1's instance with another array
    # THEN IAM denies it: the grant covers only instances that carry no raidsnap:array
    with pytest.raises(AccessDeniedError, match="UnauthorizedOperation"):
        emu.iam.authorize("ec2", "CreateTags", {"Resources": [db1.instance_id], **params}, attach)
    # AND an untagged instance (a configured replacement) it may tag
    emu.iam.authorize("ec2", "CreateTags", {"Resources": [untagged], **params}, attach)
    # AND the clean-up's role may take the tag off only an instance that carries it
    cleanup = next(p for p in emu.iam.stack.principals if p.startswith("RestoreRestoreCleanup"))
    with pytest.raises(AccessDeniedError):
        emu.iam.authorize("ec2", "DeleteTags", {"Resources": [untagged], **params}, cleanup)


def test_a_backup_follows_the_array_to_an_instance_the_config_names(emu: Emulation) -> None:
    # GIVEN db1 backed up on its instance, which is then lost; its array rebuilt on another
    # instance, tagged db1, that the configuration names for db1 (its replacement)
    old = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, old)
    terminate(old.instance_id)
    new = make_array(emu.hosts, "db1", 2)
    name_in_config(emu, "db1", new.instance_id)
    # WHEN the next backups run
    emu.clock.advance(60)
    run = emu.run("backup", {"array": "db1"})
    # THEN they take the array there, say so, and record the move
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["memberVolumeIds"] == new.member_ids
    assert any("moved from" in n and "configuration names" in n for n in run.output["notes"])
    moved = homes.moved(lock_table(), "db1")
    assert moved is not None and (moved.instance_id, moved.by) == (new.instance_id, "configuration")


def test_snapshot_tags_do_not_steer_where_a_restore_mounts(emu: Emulation) -> None:
    # GIVEN db1 backed up from /data on /dev/md0; then someone allowed to tag snapshots points its
    # newest set at another (allowed, non-system) place and md device
    fx = make_array(emu.hosts, "db1", 2, mount_point="/data")
    set_id = backed_up(emu.hosts, emu.run, fx)
    snaps = [str(s["SnapshotId"]) for s in sets_of("db1")[set_id]]
    boto3.client("ec2").create_tags(
        Resources=snaps,
        Tags=[
            {"Key": "raidsnap:mount-point", "Value": "/srv/other"},
            {"Key": "raidsnap:md-device", "Value": "/dev/md9"},
        ],
    )
    terminate(fx.instance_id)
    new = launch_instance("db1-new", fx.availability_zone, tag_array=False)
    name_in_config(emu, "db1", new)
    # WHEN latest is restored without a mount point or md device, as a recovery sends it
    run = emu.run("restore", {"array": "db1", "targetInstanceId": new, "initialization": "none"})
    # THEN it goes where the backup recorded the array, and says the tag disagreed
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert (run.output["mountPoint"], run.output["mdDevice"]) == ("/data", "/dev/md0")
    assert sorted(emu.hosts.state(new).arrays) == ["/dev/md0"]
    assert any("/srv/other" in n for n in run.output["notes"])


def test_a_legacy_sets_tag_cannot_mount_it_where_files_run_as_root(emu: Emulation) -> None:
    # GIVEN a set recorded before manifests kept md facts (its tags are all there is), whose
    # mount-point tag someone set to a directory cloud-init runs at every boot
    fx = make_array(emu.hosts, "db1", 2, mount_point="/data")
    set_id = backed_up(emu.hosts, emu.run, fx)
    boto3.client("dynamodb").update_item(
        TableName=sets_table(),
        Key={"array": {"S": "db1"}, "setId": {"S": set_id}},
        UpdateExpression="REMOVE md",
    )
    snaps = [str(s["SnapshotId"]) for s in sets_of("db1")[set_id]]
    boto3.client("ec2").create_tags(
        Resources=snaps, Tags=[{"Key": "raidsnap:mount-point", "Value": PER_BOOT}]
    )
    terminate(fx.instance_id)
    new = launch_instance("db1-new", fx.availability_zone, tag_array=False)
    name_in_config(emu, "db1", new)
    mark = len(emu.double.calls)
    # WHEN latest is restored without a mount point
    run = emu.run("restore", {"array": "db1", "targetInstanceId": new, "initialization": "none"})
    # THEN the tag's place is refused by the allowed places, and nothing changed
    assert (run.status, run.error) == ("FAILED", "InvalidInput"), run.cause
    assert "mountPoint" in run.cause and "no mountPoint was given" in run.cause
    assert changes(emu, mark) == []


def test_a_copy_onto_a_second_tagged_instance_while_the_arrays_is_stopped_moves_nothing(
    emu: Emulation,
) -> None:
    # GIVEN db1 backed up from its instance, which is then stopped (maintenance, not lost), and
    # a second instance tagged db1 (someone's scratch copy, or a squatter's)
    db1 = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, db1)
    ec2 = boto3.client("ec2")
    ec2.stop_instances(InstanceIds=[db1.instance_id])
    second = launch_instance("db1", db1.availability_zone)
    # WHEN db1 is restored, writable, onto the second instance
    emu.clock.advance(60)
    request = {"array": "db1", "targetInstanceId": second, "initialization": "none"}
    run = emu.run("restore", request | {"mountPoint": "/data"})
    # THEN the array stays recorded on its own instance, and the run says how to move it
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert homes.moved(lock_table(), "db1") is None
    assert any(f"raidsnap move db1 {second}" in n for n in run.output["notes"])
    # AND once db1's instance is back, its backups take db1's own members
    ec2.start_instances(InstanceIds=[db1.instance_id])
    emu.clock.advance(3600)
    backup = emu.run("backup", {"array": "db1"})
    assert backup.status == "SUCCEEDED", f"{backup.error}: {backup.cause}"
    assert backup.output["memberVolumeIds"] == db1.member_ids


def test_no_config_entry_makes_another_arrays_instance_a_target(emu: Emulation) -> None:
    # GIVEN db2 live and backed up on an instance that a stale config entry names for db1
    db1 = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, db1)
    db2 = make_array(emu.hosts, "db2", 2, unrelated=0)
    backed_up(emu.hosts, emu.run, db2)
    name_in_config(emu, "db1", db2.instance_id)
    mark = len(emu.double.calls)
    # WHEN db1 is restored onto db2's instance, inside db2's mount point
    run = emu.run("restore", copy_request("db1", db2.instance_id))
    # THEN it is refused, and nothing changed there
    assert (run.status, run.error) == ("FAILED", "InvalidInput"), run.cause
    assert "db2, another array's" in run.cause
    assert changes(emu, mark) == [] and sorted(emu.hosts.state(db2.instance_id).arrays) == [
        "/dev/md0"
    ]


def test_an_array_found_by_its_tags_alone_is_no_copy_target(emu: Emulation) -> None:
    # GIVEN an array "ledger" found by its tags only (no config, its first backup not run yet)
    db1 = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, db1)
    ledger = make_array(emu.hosts, "ledger", 2, unrelated=0)
    mark = len(emu.double.calls)
    # WHEN db1 is restored onto ledger's instance
    run = emu.run("restore", copy_request("db1", ledger.instance_id))
    # THEN it is refused: only a name made from db1's own (db1-copy, db1-drill) marks a copy
    assert (run.status, run.error) == ("FAILED", "InvalidInput"), run.cause
    assert "raidsnap:array=ledger, a name that is not db1's" in run.cause
    assert changes(emu, mark) == [] and sorted(emu.hosts.state(ledger.instance_id).arrays) == [
        "/dev/md0"
    ]


def test_a_copy_elsewhere_never_takes_the_mount_point_its_array_chose(emu: Emulation) -> None:
    # GIVEN db1 mounted by its own instance at a directory whose files run as root at boot
    db1 = make_array(emu.hosts, "db1", 2, mount_point=PER_BOOT)
    backed_up(emu.hosts, emu.run, db1)
    copy = launch_instance("db1-copy", db1.availability_zone)
    mark = len(emu.double.calls)
    # WHEN a copy is restored onto another instance without a mount point
    request = {"array": "db1", "targetInstanceId": copy, "mdDevice": "/dev/md5"}
    run = emu.run("restore", request | {"initialization": "none"})
    # THEN the recorded place is refused there (it counts only on the array's own instance)
    assert (run.status, run.error) == ("FAILED", "InvalidInput"), run.cause
    assert "mountPoint" in run.cause and "a copy on another instance never takes" in run.cause
    assert changes(emu, mark) == [] and emu.hosts.state(copy).arrays == {}


def copy_request(array: str, target: str) -> dict[str, object]:
    return {
        "array": array,
        "targetInstanceId": target,
        "mountPoint": "/data/copy",
        "mdDevice": "/dev/md5",
        "initialization": "none",
    }


def test_a_replacement_tagged_with_another_name_warns_at_every_backup_and_refuses_loudly(
    emu: Emulation,
) -> None:
    # GIVEN db1 and its configured replacement, which someone tagged db1-standby
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    standby = launch_instance("db1-standby", fx.availability_zone)
    configure_recovery(emu, "db1", instanceId=fx.instance_id, replacementInstanceId=standby)
    # WHEN a backup runs, THEN it says the recovery onto it would be refused, and why
    emu.clock.advance(60)
    backup = emu.run("backup", {"array": "db1"})
    assert backup.status == "SUCCEEDED", f"{backup.error}: {backup.cause}"
    assert any(standby in n and "would be refused" in n for n in backup.output["notes"])
    # AND when db1's instance is lost, the restore onto it is refused naming the tag (a recovery
    # that ran there would leave db1 without backups: nothing finds it by db1's tag)
    terminate(fx.instance_id)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": standby})
    assert (run.status, run.error) == ("FAILED", "InvalidInput"), run.cause
    assert "carries raidsnap:array=db1-standby" in run.cause and "remove that tag" in run.cause
    assert instance_tags(standby)["raidsnap:array"] == "db1-standby"


def test_the_drill_instance_never_becomes_the_arrays_by_a_tag(emu: Emulation) -> None:
    # GIVEN db1 backed up, its drill instance named in the config, db1's instance stopped
    db1 = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, db1)
    drill = make_array(emu.hosts, "db1-drill", 2, unrelated=0)
    name_in_config(emu, "db1", drill.instance_id, drill=True)
    boto3.client("ec2").stop_instances(InstanceIds=[db1.instance_id])
    # WHEN someone tags the drill instance db1
    boto3.client("ec2").create_tags(
        Resources=[drill.instance_id], Tags=[{"Key": "raidsnap:array", "Value": "db1"}]
    )
    emu.clock.advance(3600)
    run = emu.run("backup", {"array": "db1"})
    # THEN the backup is refused: a drill instance receives copies, it is never the array's
    assert (run.status, run.error) == ("FAILED", "ArrayInstanceChanged"), run.cause
    assert homes.moved(lock_table(), "db1") is None


def test_a_drill_instance_the_config_names_may_carry_any_name_of_its_own(emu: Emulation) -> None:
    # GIVEN db1 and a drill instance the config names for it, tagged "drill" (shared by arrays)
    create_topics(emu)
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    host = launch_instance("drill", fx.availability_zone)
    name_in_config(emu, "db1", host, drill=True)
    # WHEN the drill runs, THEN it restores its read-only copy there and passes
    run = emu.run("drill", {"array": "db1", "targetInstanceId": host})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert instance_tags(host)["raidsnap:array"] == "drill"
