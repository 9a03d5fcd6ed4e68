"""Review of issue 23 (copies to other Regions and accounts): what the design promised and the
code does not hold. Each test fails on the code as reviewed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from raidsnap.workflows.copy.progress import TIME_LIMIT
from raidsnap_emulation.double import acting_as
from raidsnap_emulation.harness import (
    BACKUP_ACCOUNT_CONFIG,
    COPIES_CONFIG,
    Emulation,
    Peer,
    synthesize,
)
from raidsnap_emulation.world import HeldStep, make_array, sets_of, tags_of

WEST = "us-west-2"
BACKUP_ACCOUNT = "222233334444"
REQUESTS_ROLE = f"arn:aws:iam::{BACKUP_ACCOUNT}:role/raidsnap-copy-requests-{WEST}"


@pytest.fixture(scope="module")
def copies_template() -> Path:
    return synthesize(config=COPIES_CONFIG)


@pytest.fixture(scope="module")
def vault_template() -> Path:
    return synthesize(config=BACKUP_ACCOUNT_CONFIG)


@pytest.fixture
def two(copies_template: Path, template: Path) -> Iterator[tuple[Emulation, Peer]]:
    with Emulation(copies_template) as emu:
        yield emu, emu.deploy(WEST, template=template)


@pytest.fixture
def vault(copies_template: Path, vault_template: Path) -> Iterator[tuple[Emulation, Peer]]:
    with Emulation(copies_template) as emu:
        yield emu, emu.deploy(WEST, BACKUP_ACCOUNT, template=vault_template)


def copied_sets(peer: Peer, array: str) -> set[str]:
    with peer.inside():
        snaps = peer.client("ec2").describe_snapshots(
            OwnerIds=["self"],
            Filters=[{"Name": "tag:raidsnap:array", "Values": [array]}],
        )["Snapshots"]
    return {tags_of(s)["raidsnap:set-id"] for s in snaps}


def as_requests_role(service: str) -> Any:
    """A client of the backup account's copy-requests role, assumed by anyone of the source
    account (its trust policy names the account: test_copies shows the source's admin assumes
    it)."""
    c = boto3.client("sts").assume_role(RoleArn=REQUESTS_ROLE, RoleSessionName="intruder")[
        "Credentials"
    ]
    return boto3.client(
        service,
        region_name=WEST,
        aws_access_key_id=c["AccessKeyId"],
        aws_secret_access_key=c["SecretAccessKey"],
        aws_session_token=c["SessionToken"],
    )


def test_a_compromised_source_account_cannot_make_the_backup_account_delete_its_copies(
    vault: tuple[Emulation, Peer],
) -> None:
    """HIGH. Issue 23 asks for "a backup account the array's account cannot delete from", against
    "a compromised account or ransomware with ec2:DeleteSnapshot". But the copy request's
    `retention` (CopyInput.retention, 1..1000) is chosen by the source: the copy workflow there
    (copy/finish.py _retention) keeps only that many complete sets of the array, whatever that
    account's own stack or config says. Whoever holds the source account can assume the
    copy-requests role (sts:AssumeRole, trust policy names the account) and start the copy
    workflow (states:StartExecution has no condition key on the execution's input: Service
    Authorization Reference, AWS Step Functions, StartExecution) with retention 1: the backup
    account deletes every older copy itself, with its own role. Sharing the source snapshots back
    for Prepare's check is the source's own ModifySnapshotAttribute (EBS User Guide, "Share an
    Amazon EBS snapshot")."""
    emu, backup = vault
    fx = make_array(emu.hosts, "db2", 2)
    set_ids = []
    for _ in range(3):
        run = emu.run("backup", {"array": fx.name})
        assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
        set_ids.append(run.output["setId"])
        emu.clock.advance(3600)
    assert copied_sets(backup, "db2") == set(set_ids)
    # WHEN the source account (compromised) shares the newest set again, and asks the backup
    # account, as the role it may assume, to "copy" it once more with a retention of 1
    newest = sets_of("db2")[set_ids[-1]]
    ec2 = boto3.client("ec2")
    for s in newest:
        ec2.modify_snapshot_attribute(
            SnapshotId=s["SnapshotId"],
            Attribute="createVolumePermission",
            OperationType="add",
            UserIds=[BACKUP_ACCOUNT],
        )
    (last,) = [
        r
        for r in (backup.wait(a) for a in backup.executions("copy"))
        if r.input["setId"] == set_ids[-1]
    ]
    request = dict(last.input) | {"retention": 1}
    sfn = as_requests_role("stepfunctions")
    arn = sfn.start_execution(
        stateMachineArn=backup.state_machines["copy"], input=json.dumps(request)
    )["executionArn"]
    backup.wait(arn)
    # THEN the backup account still has every copy its own retention keeps (db2's default: 7)
    assert copied_sets(backup, "db2") == set(set_ids)


def shared_with(snapshot_id: str) -> list[str]:
    answer = boto3.client("ec2").describe_snapshot_attribute(
        SnapshotId=snapshot_id, Attribute="createVolumePermission"
    )
    return [p["UserId"] for p in answer["CreateVolumePermissions"] if "UserId" in p]


def test_a_backup_run_that_ends_before_its_copy_does_not_leave_the_set_shared(
    vault: tuple[Emulation, Peer],
) -> None:
    """MEDIUM. The source shares the set's snapshots with the backup account in HandOverCopies
    and takes the share back only in FollowCopies, when it sees the copy run ended
    (backup/copies.py _ended). A backup run that ends first never takes it back: the backup
    state machine's TimeoutSeconds is 86400 while a copy run may take 36 hours (copy/progress.py
    TIME_LIMIT, "a first copy ... can take most of a day"), and an execution's own timeout or a
    StopExecution runs no Catch ("States.Timeout ... the execution fails", Step Functions
    Developer Guide, "Error handling"; a stopped execution runs no further state). The snapshots
    then stay shared with the other account for good ("Share an Amazon EBS snapshot": shared until
    the permission is removed), and the manifest keeps the copy "copying". Here the run is stopped
    while its copy is under way (the same ending as the timeout, which the emulation does not
    keep on its clock)."""
    emu, backup = vault
    make_array(emu.hosts, "db2", 2)
    held = HeldStep(emu, "copy_finish")
    first = emu.start("backup", {"array": "db2"})
    held.wait()
    boto3.client("stepfunctions").stop_execution(executionArn=first, cause="timed out")
    # Step Functions tells EventBridge of the run's end (the emulation delivers status changes
    # when a test says so, as the other tests of stopped runs do)
    assert emu.wait(first).status == "ABORTED"
    emu.services.execution_event(first)
    held.release()
    (done,) = [backup.wait(a) for a in backup.executions("copy")]
    assert done.status == "SUCCEEDED", f"{done.error}: {done.cause}"
    (set_id,) = sets_of("db2")
    # THEN the copy is made, and the source's snapshots are no longer shared with the backup
    # account
    assert [shared_with(str(s["SnapshotId"])) for s in sets_of("db2")[set_id]] == [
        [],
        [],
    ]
    # AND the set's record no longer says the copy is under way
    ddb = boto3.client("dynamodb")
    (table,) = [
        t
        for t in ddb.list_tables()["TableNames"]
        if [k["AttributeName"] for k in ddb.describe_table(TableName=t)["Table"]["KeySchema"]]
        == ["array", "setId"]
    ]
    item = ddb.get_item(TableName=table, Key={"array": {"S": "db2"}, "setId": {"S": set_id}})
    assert "copying" not in json.dumps(item["Item"]["copies"])


def test_a_backup_run_can_wait_as_long_as_its_copy_may_take() -> None:
    """MEDIUM (the automatic way to the test above). The backup waits in FollowCopies for the copy
    run, which gives up only after copy/progress.py TIME_LIMIT (36 h); the backup state machine
    times out after TimeoutSeconds (24 h), with no Catch (Step Functions Developer Guide,
    "Error handling": an execution's timeout ends it as States.Timeout). A first copy of a large
    array then leaves its share open and its copy recorded as "copying"."""
    root = Path(__file__).resolve().parents[3]
    backup = json.loads((root / "statemachines" / "backup.asl.json").read_text())
    assert backup["TimeoutSeconds"] > TIME_LIMIT.total_seconds()


def test_copies_into_a_region_do_not_delete_the_sets_its_own_stack_took_of_an_array_of_that_name(
    two: tuple[Emulation, Peer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """HIGH. Array names are a stack's own (config arrays.<name>, the instance's raidsnap:array
    tag); nothing makes them unique across Regions. The stack in us-west-2 backs up its own db1;
    us-east-1's db1, another database, is copied to us-west-2 with "retention: 2"
    (config/copies.example.yaml). The copy run's retention there (copy/finish.py _retention)
    counts every complete set of "db1" there, its own stack's included, and deletes all but the
    newest 2 with DeleteSnapshot granted on any raidsnap-tagged snapshot; and a restore of db1
    there then finds the copy (another database) as the newest complete set. Prepare refuses a
    copy only when the same set id was taken there; it never compares the md UUID or asks
    whether the array there is a local one."""
    emu, west = two
    with monkeypatch.context() as m:
        m.setenv("AWS_DEFAULT_REGION", WEST)
        with west.inside():
            make_array(emu.hosts, "db1", 2, availability_zone=f"{WEST}a")
    local = []
    for _ in range(3):
        run = west.run("backup", {"array": "db1"})
        assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
        local.append(run.output["setId"])
        emu.clock.advance(3600)
    # WHEN us-east-1's own db1 is backed up and copied to us-west-2
    fx = make_array(emu.hosts, "db1", 2)
    run = emu.run("backup", {"array": fx.name})
    # THEN the copy there is refused by name (db1 there is another array: another md UUID),
    # the set here is complete, and us-west-2 keeps every set its own stack took of its db1
    # and no copy of the other db1
    assert (run.status, run.error) == ("FAILED", "CopyFailed"), run.cause
    assert "md UUID" in (run.cause or "")
    assert len(sets_of("db1")) == 1
    assert copied_sets(west, "db1") == set(local)


def test_a_set_encrypted_with_the_aws_managed_key_is_not_shared_with_the_backup_account(
    vault: tuple[Emulation, Peer],
) -> None:
    """LOW (emulation agrees with the code where AWS would not). "Snapshots encrypted with your
    default KMS key cannot be shared with other accounts" (EC2 API reference,
    ModifySnapshotAttribute; EBS User Guide, "Share an Amazon EBS snapshot with other AWS
    accounts"). docs/copies.md says so, but nothing checks it: on AWS the hand-over's
    ModifySnapshotAttribute is refused and the backup fails with EC2's raw error after its set
    completed (not CopyFailed naming the key), and the double shares and copies such a set, so
    no test can see it."""
    emu, _ = vault
    make_array(emu.hosts, "db2", 2, encrypted=True)
    (snap_key,) = {
        v.get("KmsKeyId", "")
        for v in boto3.client("ec2").describe_volumes(
            Filters=[{"Name": "encrypted", "Values": ["true"]}]
        )["Volumes"]
    }
    aliases = boto3.client("kms").list_aliases()["Aliases"]
    assert any(
        a["AliasName"] == "alias/aws/ebs" and snap_key.endswith(a.get("TargetKeyId", "-"))
        for a in aliases
    ), f"the members are not under aws/ebs ({snap_key}): the premise does not hold"
    run = emu.run("backup", {"array": "db2"})
    # THEN nothing was shared or copied, and the backup says why, by name
    assert (run.status, run.error) == ("FAILED", "CopyFailed"), run.cause
    assert "customer managed key" in (run.cause or "")


def test_the_backup_copy_step_cannot_make_a_sets_snapshot_public(
    vault: tuple[Emulation, Peer],
) -> None:
    """LOW (least privilege; emulation too permissive). The copy step's ModifySnapshotAttribute
    statements (lib/constructs/copies.ts handOverStatements) constrain ec2:Add/userId only. One
    call may add UserIds and GroupNames ["all"] together (API reference,
    ModifySnapshotAttribute: GroupNames, UserIds), and the Service Authorization Reference lists
    ec2:Add/group for it (ec2:ModifySnapshotAttribute, snapshot: ec2:Add/group, ec2:Add/userId,
    ...): with no condition on ec2:Add/group the statement allows making every set snapshot
    public alongside the backup account. The emulation's context (iam/context.py
    _snapshot_attribute) never sets ec2:Add/group, so it cannot tell."""
    emu, _ = vault
    make_array(emu.hosts, "db2", 2)
    run = emu.run("backup", {"array": "db2"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    snapshot = str(sets_of("db2")[run.output["setId"]][0]["SnapshotId"])
    (fn,) = [
        n for n, f in emu.router.functions.items() if f.handler.endswith(".backup_copies.handler")
    ]
    with (
        acting_as(fn),
        pytest.raises(ClientError),
    ):  # the premise: IAM judges these calls
        boto3.client("ec2").delete_snapshot(SnapshotId=snapshot)
    outcome = "allowed"
    with acting_as(fn):
        try:
            boto3.client("ec2").modify_snapshot_attribute(
                SnapshotId=snapshot,
                Attribute="createVolumePermission",
                OperationType="add",
                UserIds=[BACKUP_ACCOUNT],
                GroupNames=["all"],
            )
        except ClientError as err:
            outcome = str(err.response["Error"]["Code"])
    assert outcome == "UnauthorizedOperation"
