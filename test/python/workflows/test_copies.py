"""Copies of sets to another Region: the backup hands each new set to the copy workflow of the
stack deployed there, which copies it, records it as a set of its own once every copy is
completed, and keeps its own number of them; the stack there restores it as a local one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from raidsnap_emulation.harness import (
    BACKUP_ACCOUNT_CONFIG,
    COPIES_CONFIG,
    COPIES_DESTINATION_CONFIG,
    Emulation,
    Peer,
    synthesize,
)
from raidsnap_emulation.world import (
    ArrayFixture,
    HeldStep,
    launch_instance,
    make_array,
    sets_of,
    tags_of,
)

WEST = "us-west-2"


@pytest.fixture(scope="module")
def copies_template() -> Path:
    return synthesize(config=COPIES_CONFIG)


@pytest.fixture
def two(copies_template: Path, template: Path) -> Iterator[tuple[Emulation, Peer]]:
    """db1's stack in us-east-1 (its config copies db1 to us-west-2) and the stack deployed in
    us-west-2 (no config of its own)."""
    with Emulation(copies_template) as emu:
        yield emu, emu.deploy(WEST, template=template)


def copies_in(peer: Peer, set_id: str) -> list[dict[str, Any]]:
    with peer.inside():
        pages = (
            peer.client("ec2")
            .get_paginator("describe_snapshots")
            .paginate(
                OwnerIds=["self"], Filters=[{"Name": "tag:raidsnap:set-id", "Values": [set_id]}]
            )
        )
        return [dict(s) for page in pages for s in page["Snapshots"]]


def manifest_in(peer: Peer, array: str, set_id: str) -> dict[str, Any] | None:
    with peer.inside():
        ddb = peer.client("dynamodb")
        table = next(
            t
            for t in ddb.list_tables()["TableNames"]
            if [k["AttributeName"] for k in ddb.describe_table(TableName=t)["Table"]["KeySchema"]]
            == ["array", "setId"]
        )
        item = ddb.get_item(
            TableName=table, Key={"array": {"S": array}, "setId": {"S": set_id}}
        ).get("Item")
    return item


def copy_runs(peer: Peer) -> list[Any]:
    return [peer.wait(arn) for arn in peer.executions("copy")]


def backed_up_and_copied(emu: Emulation, fx: ArrayFixture) -> Any:
    run = emu.run("backup", {"array": fx.name})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    return run


def test_a_set_copied_to_another_region_restores_there_onto_an_instance_there(
    two: tuple[Emulation, Peer],
) -> None:
    emu, west = two
    fx = make_array(emu.hosts, "db1", 3)
    # WHEN db1 is backed up in us-east-1
    run = backed_up_and_copied(emu, fx)
    set_id = run.output["setId"]
    # THEN the set was handed to us-west-2 and copied there, member by member
    report = run.output["copies"][WEST]
    assert report["status"] == "copied", report
    copies = copies_in(west, set_id)
    assert len(copies) == 3
    sources = {tags_of(s)["raidsnap:member-index"]: s for s in sets_of("db1")[set_id]}
    for copy in copies:
        t = tags_of(copy)
        source = sources[t["raidsnap:member-index"]]
        assert copy["State"] == "completed"
        assert copy["VolumeId"] == "vol-ffffffff"  # a copy's volume id means nothing
        assert t["raidsnap:array"] == "db1" and t["raidsnap:set-id"] == set_id
        assert t["raidsnap:md-uuid"] == fx.md_uuid
        assert t["raidsnap:source-snapshot"] == source["SnapshotId"]
        assert t["raidsnap:source-region"] == "us-east-1"
        assert "raidsnap:backup-execution" not in t
    assert sorted(report["snapshotIds"]) == sorted(c["SnapshotId"] for c in copies)
    # ... and recorded there as a set of its own, taken, that says where it came from
    item = manifest_in(west, "db1", set_id)
    assert item is not None and item["status"]["S"] == "taken"
    assert item["source"]["M"]["region"]["S"] == "us-east-1"
    # ... and the RPO report here counts the copy there from when the set was taken
    reported = emu.invoke("monitor_set_age", {}).result
    there = reported["copies"]["db1"][WEST]
    assert there["newestCopiedSet"] == set_id
    assert there["ageMinutes"] == reported["arrays"]["db1"]["ageMinutes"]
    # WHEN an instance in us-west-2 is made db1's and the stack there restores db1
    target = launch_instance("db1", f"{WEST}a", region=WEST)
    restore = west.run("restore", {"array": "db1"})
    # THEN the newest complete set there (the copy) is restored onto it, in its AZ
    assert restore.status == "SUCCEEDED", f"{restore.error}: {restore.cause}"
    assert restore.output["setId"] == set_id
    assert restore.output["targetInstanceId"] == target
    with west.inside():
        volumes = west.client("ec2").describe_volumes(VolumeIds=restore.output["volumeIds"])
    copy_ids = {c["SnapshotId"] for c in copies}
    assert {v["SnapshotId"] for v in volumes["Volumes"]} == copy_ids
    assert {v["AvailabilityZone"] for v in volumes["Volumes"]} == {f"{WEST}a"}
    md = emu.hosts.state(target).arrays[restore.output["mdDevice"]]
    assert md.mount_point == fx.mount_point
    assert md.md_uuid != fx.md_uuid  # a restored array has an identity of its own
    # ... and initialized there as anywhere: the prewarm reads every member on that instance
    assert restore.output.get("warnings", []) == [], restore.output.get("warnings")


def test_a_copy_that_errors_leaves_nothing_complete_there_and_fails_the_backup_by_name(
    two: tuple[Emulation, Peer],
) -> None:
    emu, west = two
    fx = make_array(emu.hosts, "db1", 3)
    ec2 = boto3.client("ec2")
    # GIVEN copies of member 1's snapshots end in error
    emu.double.fail_copies(fx.member_ids[1])
    # WHEN db1 is backed up
    run = emu.run("backup", {"array": "db1"})
    # THEN the set is complete here, the backup fails by name and says so
    assert (run.status, run.error) == ("FAILED", "CopyFailed"), run.cause
    assert "is complete here" in (run.cause or "") and WEST in (run.cause or "")
    (set_id,) = sets_of("db1")
    assert all(s["State"] == "completed" for s in sets_of("db1")[set_id])
    # ... the copy run there failed by name, deleted every copy it made, and kept no record
    (copy_run,) = copy_runs(west)
    assert (copy_run.status, copy_run.error) == ("FAILED", "CopyFailed")
    assert "member 1" in (copy_run.cause or "")
    assert copies_in(west, set_id) == []
    assert manifest_in(west, "db1", set_id) is None
    # ... nothing of the source was touched
    assert len(ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]) == 3
    # ... and the RPO report says no set of db1 is copied there (its alarm fires)
    there = emu.invoke("monitor_set_age", {}).result["copies"]["db1"][WEST]
    assert there["newestCopiedSet"] is None and there["ageMinutes"] >= 10 * 365 * 24 * 60


def test_a_destination_key_the_copy_cannot_use_fails_the_copy_and_removes_it(
    two: tuple[Emulation, Peer],
) -> None:
    emu, west = two
    make_array(emu.hosts, "db1", 2)
    # GIVEN a key in us-west-2 whose policy lets only an administrator use it (no delegation to
    # the account's IAM policies: the copy function's own grant cannot reach it)
    with west.inside():
        key = west.client("kms").create_key(
            Description="db1 copies",
            Policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"AWS": "arn:aws:iam::123456789012:role/key-admin"},
                            "Action": "kms:*",
                            "Resource": "*",
                        }
                    ],
                }
            ),
        )["KeyMetadata"]["Arn"]
    configure_copy_key(emu, "db1", key)
    # WHEN db1 is backed up
    run = emu.run("backup", {"array": "db1"})
    # THEN EC2 ended the copies in error (it could not use the key); the copy run deleted them
    assert (run.status, run.error) == ("FAILED", "CopyFailed"), run.cause
    (copy_run,) = copy_runs(west)
    assert copy_run.error == "CopyFailed"
    assert "is not accessible" in (copy_run.cause or "") and key in (copy_run.cause or "")
    (set_id,) = sets_of("db1")
    assert copies_in(west, set_id) == []
    assert manifest_in(west, "db1", set_id) is None


def configure_copy_key(emu: Emulation, array: str, key_arn: str) -> None:
    """The array's copies are encrypted with this key there (arrays.<array>.copies[].kmsKeyArn;
    the key is made by the test, so its ARN is given here as a config file would)."""
    assert emu.router is not None
    for fn in emu.router.functions.values():
        if "COPIES_BY_ARRAY" not in fn.environment:
            continue
        current = json.loads(fn.environment["COPIES_BY_ARRAY"])
        for copy in current.get(array, []):
            copy["kmsKeyArn"] = key_arn
        fn.environment["COPIES_BY_ARRAY"] = json.dumps(current)


def test_the_regions_limit_of_concurrent_copies_holds_members_back_until_there_is_room(
    two: tuple[Emulation, Peer],
) -> None:
    emu, west = two
    fx = make_array(emu.hosts, "db1", 3)
    # GIVEN another tool has 18 copies to us-west-2 under way (of a snapshot of its own)
    ec2 = boto3.client("ec2")
    other = ec2.create_snapshot(VolumeId=fx.other_volume_ids[0])["SnapshotId"]
    emu.clock.advance(emu.double.snapshot_seconds + 1)
    with west.inside():
        for _ in range(18):
            west.client("ec2").copy_snapshot(SourceRegion="us-east-1", SourceSnapshotId=other)
    # WHEN db1 is backed up
    run = backed_up_and_copied(emu, fx)
    # THEN EC2 refused the copy beyond the Region's 20 (ResourceLimitExceeded), that member
    # waited for room, and every member was copied once
    refused = [
        c
        for c in emu.double.calls
        if c.operation == "CopySnapshot" and c.error_code == "ResourceLimitExceeded"
    ]
    assert refused and all("CopyProgress" in str(c.actor) for c in refused)
    copies = copies_in(west, run.output["setId"])
    assert len(copies) == 3 and all(c["State"] == "completed" for c in copies)
    (copy_run,) = copy_runs(west)
    assert copy_run.status == "SUCCEEDED"
    assert copy_run.states_entered.count("CopyAgain") >= 2


def test_a_copy_whose_answer_was_lost_is_found_and_not_made_twice(
    two: tuple[Emulation, Peer],
) -> None:
    emu, west = two
    fx = make_array(emu.hosts, "db1", 2)
    # GIVEN EC2 makes a copy but its answer is lost (throttled on the way back), and the next
    # CopySnapshot is throttled before it takes effect
    emu.double.fail("ec2", "CopySnapshot", code="RequestLimitExceeded", after_success=True)
    emu.double.throttle("ec2", "CopySnapshot", times=1)
    # WHEN db1 is backed up
    run = backed_up_and_copied(emu, fx)
    # THEN each member has exactly one copy: the retried step found the one EC2 made
    made = [c for c in emu.double.calls if c.operation == "CopySnapshot" and c.applied]
    assert len(made) == 2
    copies = copies_in(west, run.output["setId"])
    assert sorted(c["SnapshotId"] for c in copies) == sorted(
        run.output["copies"][WEST]["snapshotIds"]
    )


@pytest.fixture
def two_keeping_2(copies_template: Path) -> Iterator[tuple[Emulation, Peer]]:
    """As ``two``, with the stack in us-west-2 keeping 2 sets per array (its own config)."""
    with Emulation(copies_template) as emu:
        yield emu, emu.deploy(WEST, template=synthesize(config=COPIES_DESTINATION_CONFIG))


def test_copies_there_keep_their_own_retention_and_the_source_its_own(
    two_keeping_2: tuple[Emulation, Peer],
) -> None:
    emu, west = two_keeping_2
    fx = make_array(emu.hosts, "db1", 2)
    # GIVEN db1 keeps 3 sets here (config/copies.example.yaml) and 2 copies in us-west-2 (the
    # config there: config/copies-destination.example.yaml)
    set_ids = []
    for _ in range(4):
        set_ids.append(backed_up_and_copied(emu, fx).output["setId"])
        emu.clock.advance(3600)
    # THEN here the newest 3 are kept, there the newest 2 copies
    assert sorted(sets_of("db1")) == sorted(set_ids[1:])
    with west.inside():
        snaps = west.client("ec2").describe_snapshots(
            OwnerIds=["self"], Filters=[{"Name": "tag:raidsnap:array", "Values": ["db1"]}]
        )["Snapshots"]
    there = {tags_of(s)["raidsnap:set-id"] for s in snaps}
    assert there == set(set_ids[2:])
    assert manifest_in(west, "db1", set_ids[1]) is None
    (last,) = [r for r in copy_runs(west) if r.input["setId"] == set_ids[-1]]
    assert last.output["retention"]["deletedSets"] == [set_ids[1]]


# ---------------------------------------------------------------------- a backup account

BACKUP_ACCOUNT = "222233334444"
VAULT = f"{BACKUP_ACCOUNT}/{WEST}"
REQUESTS_ROLE = f"arn:aws:iam::{BACKUP_ACCOUNT}:role/raidsnap-copy-requests-{WEST}"


@pytest.fixture(scope="module")
def vault_template() -> Path:
    return synthesize(config=BACKUP_ACCOUNT_CONFIG)


@pytest.fixture
def vault(copies_template: Path, vault_template: Path) -> Iterator[tuple[Emulation, Peer]]:
    """db2's stack (its config copies db2 to us-west-2 of the backup account) and the backup
    account's stack there (it accepts copies from db2's account)."""
    with Emulation(copies_template) as emu:
        yield emu, emu.deploy(WEST, BACKUP_ACCOUNT, template=vault_template)


def shared_with(snapshot_id: str) -> list[str]:
    answer = boto3.client("ec2").describe_snapshot_attribute(
        SnapshotId=snapshot_id, Attribute="createVolumePermission"
    )
    return [p["UserId"] for p in answer["CreateVolumePermissions"] if "UserId" in p]


def test_a_set_copied_to_a_backup_account_is_its_own_there_and_restores_there(
    vault: tuple[Emulation, Peer],
) -> None:
    emu, backup = vault
    fx = make_array(emu.hosts, "db2", 2)
    # WHEN db2 is backed up
    run = backed_up_and_copied(emu, fx)
    set_id = run.output["setId"]
    # THEN its snapshots were shared with the backup account for the copy, and no longer are
    assert run.output["copies"][VAULT]["status"] == "copied"
    sources = sets_of("db2")[set_id]
    shares = [c for c in emu.double.calls if c.operation == "ModifySnapshotAttribute" and c.applied]
    assert {(c.params["OperationType"], c.params["UserIds"][0]) for c in shares} == {
        ("add", BACKUP_ACCOUNT),
        ("remove", BACKUP_ACCOUNT),
    }
    assert all(shared_with(str(s["SnapshotId"])) == [] for s in sources)
    # ... the copies belong to the backup account, are recorded there, and the copy was started
    # there as its copy-requests role (assumed by the copy step here)
    copies = copies_in(backup, set_id)
    assert len(copies) == 2 and {c["OwnerId"] for c in copies} == {BACKUP_ACCOUNT}
    assert {tags_of(c)["raidsnap:source-account"] for c in copies} == {"123456789012"}
    # ... and say when their source snapshots were taken, as EC2 shows them to that account
    # (`raidsnap sets adopt` there judges a copied set by it)
    starts = {f"{s['StartTime']:%Y-%m-%dT%H:%M:%SZ}" for s in sources}
    assert {tags_of(c)["raidsnap:source-start-time"] for c in copies} == starts
    assert manifest_in(backup, "db2", set_id) is not None
    starts = [c for c in emu.double.calls if c.operation == "StartExecution" and c.applied]
    assert [c.actor for c in starts if "raidsnap-copy" in c.params["stateMachineArn"]] == [
        f"{BACKUP_ACCOUNT}/{WEST}/role:raidsnap-copy-requests-{WEST}"
    ]
    # ... and the backup account's stack restores it onto an instance there
    with backup.inside():
        target = launch_instance("db2", f"{WEST}a", region=WEST)
    restore = backup.run("restore", {"array": "db2"})
    assert restore.status == "SUCCEEDED", f"{restore.error}: {restore.cause}"
    assert restore.output["setId"] == set_id and restore.output["targetInstanceId"] == target


def test_the_source_account_can_start_copies_there_but_not_delete_one(
    vault: tuple[Emulation, Peer],
) -> None:
    emu, backup = vault
    fx = make_array(emu.hosts, "db2", 2)
    set_id = backed_up_and_copied(emu, fx).output["setId"]
    (copy, *_) = copies_in(backup, set_id)
    # WHEN someone of the source account assumes the role its stack uses there and deletes a copy
    credentials = boto3.client("sts").assume_role(RoleArn=REQUESTS_ROLE, RoleSessionName="someone")[
        "Credentials"
    ]
    ec2 = boto3.client(
        "ec2",
        region_name=WEST,
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
    )
    with pytest.raises(ClientError) as denied:
        ec2.delete_snapshot(SnapshotId=copy["SnapshotId"])
    # THEN the backup account refuses it, and the copy stays
    assert denied.value.response["Error"]["Code"] == "UnauthorizedOperation"
    assert len(copies_in(backup, set_id)) == 2


def test_a_copy_of_a_set_not_shared_with_the_backup_account_fails_and_copies_nothing(
    vault: tuple[Emulation, Peer],
) -> None:
    emu, backup = vault
    fx = make_array(emu.hosts, "db2", 2)
    # GIVEN a set of db2 whose copy was handed over, and whose snapshots were not shared (the
    # share was taken back, or never made)
    run = backed_up_and_copied(emu, fx)
    (done,) = copy_runs(backup)
    request = done.input
    for snapshot in sets_of("db2")[run.output["setId"]]:
        assert shared_with(str(snapshot["SnapshotId"])) == []
    # WHEN the copy of such a set is asked for (as a new set id: the first one is copied)
    request["setId"] = request["setId"] + "-again"
    again = backup.run("copy", request)
    # THEN it fails by name, saying the snapshots are not shared with the backup account
    assert (again.status, again.error) == ("FAILED", "SnapshotSetNotFound"), again.cause
    assert "not shared with this account" in (again.cause or "")
    assert copies_in(backup, request["setId"]) == []
    assert manifest_in(backup, "db2", request["setId"]) is None


def test_retention_here_keeps_a_set_while_it_is_being_copied(two: tuple[Emulation, Peer]) -> None:
    emu, _ = two
    fx = make_array(emu.hosts, "db1", 2)
    # GIVEN db1's first set is still being copied (its copy run there has not ended)
    held = HeldStep(emu, "copy_finish")
    first = emu.start("backup", {"array": "db1"})
    held.wait()
    # WHEN three more sets are taken meanwhile (db1 keeps 3 here)
    later = []
    for _ in range(3):
        emu.clock.advance(3600)
        later.append(backed_up_and_copied(emu, fx))
    # THEN the first set is kept while its copy runs
    (first_id,) = set(sets_of("db1")) - {r.output["setId"] for r in later}
    assert later[-1].output["retention"]["deletedSets"] == []
    assert first_id in later[-1].output["retention"]["keptSets"]
    # ... and once its copy ended, the next backup's retention lets it go
    held.release()
    assert emu.wait(first).status == "SUCCEEDED"
    emu.clock.advance(3600)
    deleted = backed_up_and_copied(emu, fx).output["retention"]["deletedSets"]
    assert deleted == [first_id, later[0].output["setId"]]


def test_a_copy_to_a_region_without_the_stack_fails_by_name_saying_what_to_deploy(
    copies_template: Path,
) -> None:
    # GIVEN db1 is copied to us-west-2, where no raidsnap stack is deployed
    with Emulation(copies_template) as emu:
        fx = make_array(emu.hosts, "db1", 2)
        # WHEN db1 is backed up
        run = emu.run("backup", {"array": "db1"})
        # THEN the set is complete here, and the backup fails by name, saying what is missing
        assert (run.status, run.error) == ("FAILED", "CopyFailed"), run.cause
        assert "StateMachineDoesNotExist" in (run.cause or "")
        assert "deploy raidsnap there" in (run.cause or "") and "raidsnap-copy" in (run.cause or "")
        (set_id,) = sets_of("db1")
        assert len(sets_of("db1")[set_id]) == len(fx.member_ids)
        record = boto3.client("dynamodb").get_item(
            TableName=next(
                t
                for t in boto3.client("dynamodb").list_tables()["TableNames"]
                if "SnapshotSets" in t
            ),
            Key={"array": {"S": "db1"}, "setId": {"S": set_id}},
        )["Item"]
        assert record["copies"]["M"][WEST]["M"]["status"]["S"] == "failed"
