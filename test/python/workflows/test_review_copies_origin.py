"""Review (second) of issue 23's fixes: ``sets adopt`` and origins in a destination, the share
with a backup account used by two of its Regions, and two arrays of one name copied into one
place. Each test fails on the code as reviewed."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from raidsnap.aws import adoption
from raidsnap_emulation.harness import (
    BACKUP_ACCOUNT_CONFIG,
    COPIES_CONFIG,
    Emulation,
    Peer,
    synthesize,
)
from raidsnap_emulation.world import (
    HeldStep,
    launch_instance,
    make_array,
    sets_of,
    tags_of,
)

WEST = "us-west-2"
EU = "eu-west-1"
BACKUP_ACCOUNT = "222233334444"
# db2 copied to us-west-2 and eu-west-1 of one backup account (next to this file).
TWO_REGIONS_CONFIG = Path(__file__).with_name("review_copies_two_regions.yaml")


@pytest.fixture(scope="module")
def copies_template() -> Path:
    return synthesize(config=COPIES_CONFIG)


@pytest.fixture
def two(copies_template: Path, template: Path) -> Iterator[tuple[Emulation, Peer]]:
    with Emulation(copies_template) as emu:
        yield emu, emu.deploy(WEST, template=template)


def sets_table_of(peer: Peer) -> str:
    with peer.inside():
        ddb = peer.client("dynamodb")
        return next(
            t
            for t in ddb.list_tables()["TableNames"]
            if [k["AttributeName"] for k in ddb.describe_table(TableName=t)["Table"]["KeySchema"]]
            == ["array", "setId"]
        )


def forget(peer: Peer, array: str) -> None:
    """The table there loses every item of the array (as test/python/cli/test_adopt.py)."""
    table = sets_table_of(peer)
    with peer.inside():
        ddb = peer.client("dynamodb")
        for item in ddb.scan(TableName=table)["Items"]:
            if item["array"]["S"] == array:
                ddb.delete_item(
                    TableName=table,
                    Key={"array": item["array"], "setId": item["setId"]},
                )


def adopt_look(peer: Peer, array: str, monkeypatch: pytest.MonkeyPatch) -> adoption.Review:
    """What ``raidsnap sets adopt ARRAY`` shows, run against the stack there (its Region, its
    table, an operator of its account)."""
    with monkeypatch.context() as m:
        m.setenv("AWS_DEFAULT_REGION", peer.region)
        m.setenv("AWS_REGION", peer.region)
        m.setenv("SNAPSHOT_SETS_TABLE", sets_table_of(peer))
        with peer.inside():
            return adoption.look(array)


def test_a_copied_set_can_be_adopted_where_it_was_copied_and_keeps_its_origin(
    two: tuple[Emulation, Peer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """HIGH. Issue 23: "A set survives the loss of its index ... the copy step writes it in the
    destination Region's and account's table, and add `raidsnap sets adopt ARRAY`". The place
    that needs this most is the destination (a backup account redeployed afresh, a DR Region
    whose table was lost). But plan/adoption.py refuses every copied set:
    - a copy's VolumeId is "vol-ffffffff" for every member: "Snapshots created by the
      CopySnapshot action have an arbitrary volume ID that should not be used for any purpose"
      (EC2 API reference, Snapshot.VolumeId; the double models it, double/copies.py), so
      ``_sources`` reports "more than one member was taken of volume(s) vol-ffffffff" and,
      since copy_tags carries the source's raidsnap:source-volume, "tagged as taken of vol-...,
      but EC2 took it of vol-ffffffff" for every member;
    - and where it would record one, ``_manifest`` writes no ``source``, although the copies
      carry raidsnap:source-account and raidsnap:source-region (workflows/copy/progress.py):
      an adopted copy's origin would be "" (sets.py SnapshotSet.origin), i.e. a set taken
      there. Then ``one_origin`` makes `latest` prefer the adopted (old) copies over every newer
      copy that arrives, the copies' retention (copy/finish.py, by origin) never counts them,
      and a local array of that name with another md UUID is no longer refused
      (prepare._check_name reads the adopted manifest as local with the source's md UUID).
    The README ("When the set table is lost") says nothing of copies."""
    emu, west = two
    fx = make_array(emu.hosts, "db1", 3)
    run = emu.run("backup", {"array": fx.name})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    set_id = run.output["setId"]
    assert run.output["copies"][WEST]["status"] == "copied"
    # WHEN the table in us-west-2 loses db1's items, and an operator there runs sets adopt db1
    forget(west, "db1")
    review = adopt_look(west, "db1", monkeypatch)
    # THEN the copy is shown as adoptable, as a copy from us-east-1 of this account
    (group,) = [g for g in review.groups if g.set_id == set_id]
    assert group.refusals == ()
    assert group.adoptable and group.manifest is not None
    assert dict(group.manifest.source) == {
        "account": emu.own.account,
        "region": "us-east-1",
    }


def shared_with(snapshot_id: str) -> list[str]:
    answer = boto3.client("ec2").describe_snapshot_attribute(
        SnapshotId=snapshot_id, Attribute="createVolumePermission"
    )
    return [p["UserId"] for p in answer["CreateVolumePermissions"] if "UserId" in p]


def test_one_region_of_the_backup_account_failing_does_not_take_the_share_from_another(
    copies_template: Path,
) -> None:
    """MEDIUM. An array may be copied to several Regions of one backup account (lib/copies.ts
    refuses only the same account and Region twice; config/backup-account.example.yaml: the
    backup account's stack is "deployed in each Region the source accounts copy to"). The share
    is per snapshot and account, not per Region: ModifySnapshotAttribute adds or removes an
    account id in createVolumePermission (EC2 API reference, ModifySnapshotAttribute), and a
    copy in any Region of that account needs it (EBS User Guide, "Share an Amazon EBS
    snapshot"). But backup/copies.py takes the share back per destination: when one Region's
    copy cannot be started (_hand_over_one, NotStartedError: e.g. the stack there is not
    deployed yet) or when one Region's copy run ends (_ended), it removes the account from
    every member while the other Region's copy run of that account still needs it. Here the
    stack is deployed in us-west-2 of the backup account but not yet in eu-west-1: the copy to
    us-west-2, which would work, fails too (SnapshotSetNotFound: "not shared with this
    account"), every backup, and no copy reaches the backup account at all."""
    source = synthesize(config=TWO_REGIONS_CONFIG)
    vault = synthesize(config=BACKUP_ACCOUNT_CONFIG)
    with Emulation(source) as emu:
        west = emu.deploy(WEST, BACKUP_ACCOUNT, template=vault)
        make_array(emu.hosts, "db2", 2)
        run = emu.run("backup", {"array": "db2"})
        # THEN the copy to eu-west-1 fails by name (no stack there) ...
        assert (run.status, run.error) == ("FAILED", "CopyFailed"), run.cause
        assert "deploy raidsnap there" in (run.cause or "")
        # ... and the copy to us-west-2 of the same account is made all the same
        (copy,) = [west.wait(a) for a in west.executions("copy")]
        assert copy.status == "SUCCEEDED", f"{copy.error}: {copy.cause}"
        # ... and afterwards the set is shared with nobody
        (members,) = sets_of("db2").values()
        assert [shared_with(str(s["SnapshotId"])) for s in members] == [[], []]


@pytest.fixture
def three(copies_template: Path, template: Path) -> Iterator[tuple[Emulation, Peer, Peer]]:
    """db1's stack in us-east-1 and one in eu-west-1 (the same config: each copies its db1 to
    us-west-2), and the stack in us-west-2 (no config of its own)."""
    with Emulation(copies_template) as emu:
        eu = emu.deploy(EU, template=copies_template)
        yield emu, eu, emu.deploy(WEST, template=template)


def test_two_arrays_of_one_name_copied_from_two_places_are_never_restored_one_for_the_other(
    three: tuple[Emulation, Peer, Peer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """HIGH. Array names are each stack's own (docs/copies.md: "Array names are each stack's
    own"), and a backup account accepts copies from several accounts (acceptCopiesFrom is a
    list), each with its own "db1". The fix for the first review keeps copies apart from the
    destination's own sets, but not from one another: prepare._check_name compares the md UUID
    only with sets taken there, and snapshot_sets.one_origin makes `latest` "the copies from
    the source of the newest complete copy". So with db1 of us-east-1 and another db1 (another
    md UUID, another database) of eu-west-1 both copied to us-west-2, a restore of
    {"array": "db1"} there restores whichever was copied last: a DR restore of us-east-1's
    database that gets eu-west-1's, SUCCEEDED, with a note only. Either the second array's copy
    is refused by name (as a clashing local array is), or `latest` refuses to choose between
    two arrays; restoring the other database is neither."""
    emu, eu, west = three
    east_db1 = make_array(emu.hosts, "db1", 2)
    first = emu.run("backup", {"array": "db1"})
    assert first.status == "SUCCEEDED", f"{first.error}: {first.cause}"
    emu.clock.advance(3600)
    with monkeypatch.context() as m:
        m.setenv("AWS_DEFAULT_REGION", EU)
        with eu.inside():
            eu_db1 = make_array(emu.hosts, "db1", 2, availability_zone=f"{EU}a")
    assert eu_db1.md_uuid != east_db1.md_uuid  # the premise: two arrays
    second = eu.run("backup", {"array": "db1"})
    if (second.status, second.error) == ("FAILED", "CopyFailed"):
        assert "md UUID" in (second.cause or "")
        # ... naming both arrays: where each comes from, and its md UUID
        assert {east_db1.md_uuid, eu_db1.md_uuid} <= set(
            (second.cause or "").replace(")", " ").replace(",", " ").split()
        ), second.cause
        assert "us-east-1" in (second.cause or "") and EU in (second.cause or "")
        return  # refused by name: the copies there stay one array's
    assert second.status == "SUCCEEDED", f"{second.error}: {second.cause}"
    # WHEN us-west-2 restores db1 (the one of us-east-1, copied there first) onto an instance
    with monkeypatch.context() as m:
        m.setenv("AWS_DEFAULT_REGION", WEST)
        with west.inside():
            launch_instance("db1", f"{WEST}a", region=WEST)
    restore = west.run("restore", {"array": "db1"})
    # THEN it does not restore the other array's set as db1
    chosen = restore.output.get("setId") if restore.status == "SUCCEEDED" else None
    if chosen is not None:
        with west.inside():
            snaps = west.client("ec2").describe_snapshots(
                OwnerIds=["self"],
                Filters=[{"Name": "tag:raidsnap:set-id", "Values": [chosen]}],
            )["Snapshots"]
        uuids = {tags_of(s).get("raidsnap:md-uuid") for s in snaps}
        assert uuids != {eu_db1.md_uuid}, (
            f"latest restored eu-west-1's db1 ({chosen}) as db1: {restore.output.get('notes')}"
        )


@pytest.fixture(scope="module")
def vault_template() -> Path:
    return synthesize(config=BACKUP_ACCOUNT_CONFIG)


def test_a_backup_that_fails_while_following_its_copy_does_not_leave_the_set_shared(
    copies_template: Path, vault_template: Path
) -> None:
    """MEDIUM. The fix for the first review ("no backup run leaves its set shared", commit
    c4fafba) covers a run that is stopped or times out: the rule (lib/constructs/
    backup-workflow.ts CopiesAbandoned) matches status ABORTED and TIMED_OUT only. A run that
    FAILS while it follows its copies goes DefaultCatch -> ExplainFailure (backup/finish.py
    explain_failure), which neither takes the share back nor records the copy as no longer
    followed. FollowCopies fails as soon as its look at the copy run there (DescribeExecution as
    the backup account's copy-requests role: handover.look) is refused once: the backup account
    redeploys its stack (the role is replaced), an SCP, its stack deleted while copying
    (ExecutionDoesNotExist). AccessDeniedException is no throttling, so LAMBDA_RETRY does not
    retry it (lib/constructs/workflow.ts). The set then stays shared with the backup account for
    good ("Share an Amazon EBS snapshot": shared until the permission is removed), and its record
    says "copying" until COPY_FOLLOWED_FOR. Step Functions sends FAILED to EventBridge as it does
    ABORTED and TIMED_OUT (Step Functions Developer Guide, "Step Functions Execution Status
    Change" events, detail.status; the API's ExecutionStatus: RUNNING, SUCCEEDED, FAILED,
    TIMED_OUT, ABORTED, PENDING_REDRIVE)."""
    with Emulation(copies_template) as emu:
        backup = emu.deploy(WEST, BACKUP_ACCOUNT, template=vault_template)
        make_array(emu.hosts, "db2", 2)
        held = HeldStep(emu, "copy_finish")
        first = emu.start("backup", {"array": "db2"})
        held.wait()
        # WHEN the backup's next look at the copy run there is refused once
        seen = len(emu.double.calls)
        emu.double.fail(
            "stepfunctions",
            "DescribeExecution",
            code="AccessDeniedException",
            message="User: arn:aws:sts::222233334444:assumed-role/raidsnap-copy-requests/x is "
            "not authorized to perform: states:DescribeExecution",
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(
            c.operation == "DescribeExecution" and c.error_code == "AccessDeniedException"
            for c in list(emu.double.calls)[seen:]
        ):
            time.sleep(0.2)
        ended = emu.wait(first)
        held.release()
        # the premise: the backup fails in FollowCopies, its set complete here
        assert ended.status == "FAILED", f"{ended.status}: {ended.error}: {ended.cause}"
        # ... by name, saying what to check, not as "Client"
        assert ended.error == "CopyFailed", f"{ended.error}: {ended.cause}"
        assert "CopyNotFollowed" in (ended.cause or "") and "Check " in (ended.cause or "")
        # EventBridge hears of the run's end (FAILED), and brings it to the copy step
        deliveries = emu.services.execution_event(first)
        assert any("CopiesAbandoned" in d.source and d.delivered for d in deliveries), deliveries
        for arn in backup.executions("copy"):
            backup.wait(arn)
        # THEN the set is shared with nobody once the run ended
        (members,) = sets_of("db2").values()
        assert [shared_with(str(s["SnapshotId"])) for s in members] == [[], []]


def test_the_backup_accounts_stack_can_be_deployed_in_each_region_it_is_copied_to(
    vault_template: Path,
) -> None:
    """LOW (deploy fails on AWS; the emulation allows it). config/backup-account.example.yaml:
    the backup account's stack is "deployed in each Region the source accounts copy to"; the
    README's example (arrays.<name>.copies: "deploy raidsnap there too, under the same stack
    name") and docs/copies.md keep one stack name. But the stack names its copy-requests role
    `<stack>-copy-requests` (lib/constructs/copies.ts copyRequestsRoleName), with no Region in
    it: "IAM user, group, role, and policy names must be unique within the account" (IAM API
    reference, CreateRole, RoleName), and IAM is global, so the second Region's stack of the
    same name fails to create its role and rolls back. The emulation (Emulation.deploy) gives
    each Region of one account a role of that name, and so never sees it (the test above only
    runs into a refused StartExecution: one role's policy names one Region's workflow)."""
    body = json.loads(vault_template.read_text())
    literal = sorted(
        str(r["Properties"]["RoleName"])
        for r in body["Resources"].values()
        if r["Type"] == "AWS::IAM::Role" and isinstance(r["Properties"].get("RoleName"), str)
    )
    # THEN no IAM role of the stack has a name that is the same in every Region it is deployed in
    assert literal == [], f"one name per account, whatever the Region: {literal}"


def test_latest_says_the_local_sets_wait_in_the_recycle_bin_rather_than_restore_a_copy(
    two: tuple[Emulation, Peer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """MEDIUM. Issue 23: "make restores find a set whose snapshots are in the Recycle Bin (say so
    and how to recover them) instead of failing with an unclear error". us-west-2 holds copies
    of us-east-1's db1, and later gets an array db1 of its own (another md UUID: a new array,
    or the one a DR restore made there, which has "an identity of its own"): the clash check
    refuses only later copies (prepare._check_name), the copies already there stay. When every
    set the stack there took of its db1 is deleted (ransomware with ec2:DeleteSnapshot, the
    issue's own threat) and a Recycle Bin rule holds them, snapshot_sets.one_origin sees no
    complete local set and makes `latest` "the copies from the source of the newest complete
    copy": set_choice.resolve_set hands absent.note_newer_binned and absent.no_complete_set
    only those copies, so neither the SnapshotsInRecycleBin refusal nor the "a newer one waits
    in the bin" note is given (the local case: test_restore_absent_sets). Instead a replace
    restore of db1 there chooses us-east-1's other database (another md UUID), creates its
    volumes, and fails only on the instance with an unclear CommandFailed (release: UuidMismatch,
    "/dev/md0 is array X, not Y"); onto an instance without the array it would restore the other
    database as db1, with only a note that "sets of another origin" were left aside. Recycle Bin:
    a deleted snapshot held by a retention rule is recoverable with
    RestoreSnapshotFromRecycleBin (EBS User Guide, "Recycle Bin")."""
    emu, west = two
    east = make_array(emu.hosts, "db1", 2)
    run = emu.run("backup", {"array": east.name})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["copies"][WEST]["status"] == "copied"
    emu.clock.advance(3600)
    # GIVEN an array db1 of us-west-2's own, backed up there, after the copy arrived
    with monkeypatch.context() as m:
        m.setenv("AWS_DEFAULT_REGION", WEST)
        with west.inside():
            local = make_array(emu.hosts, "db1", 2, availability_zone=f"{WEST}a")
    assert local.md_uuid != east.md_uuid
    own = west.run("backup", {"array": "db1"})
    assert own.status == "SUCCEEDED", f"{own.error}: {own.cause}"
    # WHEN its set's snapshots are deleted there, and a Recycle Bin rule there holds them
    with monkeypatch.context() as m:
        m.setenv("AWS_DEFAULT_REGION", WEST)
        with west.inside():
            emu.double.retain_deleted_snapshots(days=7)
            ec2 = west.client("ec2")
            for snap in ec2.describe_snapshots(
                OwnerIds=["self"],
                Filters=[{"Name": "tag:raidsnap:set-id", "Values": [own.output["setId"]]}],
            )["Snapshots"]:
                ec2.delete_snapshot(SnapshotId=snap["SnapshotId"])
    restore = west.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    # THEN the restore says the array's own set waits in the Recycle Bin, and how to get it
    # back, and restores nothing (not us-east-1's db1 in its place)
    assert (restore.status, restore.error) == ("FAILED", "SnapshotsInRecycleBin"), (
        f"{restore.status}: {restore.error}: {restore.cause} "
        f"{(restore.output or {}).get('setId')} {(restore.output or {}).get('notes')}"
    )
