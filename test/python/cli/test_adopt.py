"""``raidsnap sets adopt``: after the set table lost an array's items (or a stack was deployed
afresh, with an empty table), the command shows what it would record from the snapshots' tags,
records it once confirmed, refuses a forged set, and the newest adopted set restores: all in one
emulated account, through the command as an operator runs it."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner, Result

from raidsnap_cli import backends
from raidsnap_cli.app import app
from raidsnap_emulation import backend as emulated
from raidsnap_emulation.world import sets_of, sets_table, tags_of

ARRAY = "db1"
SEEDED = 3


@pytest.fixture
def account(template: Path) -> Iterator[backends.Backend]:
    """The emulated account of ``--emulation --seed-backups 3``: db1 on its instance, three sets
    an hour apart, kept for every command of the test."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(emulated, "account", partial(emulated.account, template=template))
        patch.setattr(boto3, "DEFAULT_SESSION", boto3.DEFAULT_SESSION)
        with backends.emulation(seed_backups=SEEDED) as found:
            yield found


def raidsnap(account: backends.Backend, *args: str, answer: str | None = None) -> Result:
    """``raidsnap ARGS --emulation`` against the test's account (not a fresh one)."""

    @contextlib.contextmanager
    def same(_seed: int) -> Iterator[backends.Backend]:
        yield account

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(backends, "emulation", same)
        return CliRunner().invoke(app, [*args, "--emulation"], input=answer, env={"COLUMNS": "200"})


def items() -> list[dict[str, Any]]:
    table = sets_table()
    return list(boto3.client("dynamodb").scan(TableName=table)["Items"])


def forget_the_array() -> None:
    """The table loses every item of the array (a restore from an old backup of the table, a
    careless delete)."""
    ddb = boto3.client("dynamodb")
    for item in items():
        ddb.delete_item(
            TableName=sets_table(), Key={"array": item["array"], "setId": item["setId"]}
        )


def a_fresh_table() -> None:
    """The table as a stack deployed afresh has it: the same keys, no item."""
    ddb = boto3.client("dynamodb")
    table = ddb.describe_table(TableName=sets_table())["Table"]
    ddb.delete_table(TableName=table["TableName"])
    ddb.create_table(
        TableName=table["TableName"],
        KeySchema=table["KeySchema"],
        AttributeDefinitions=table["AttributeDefinitions"],
        BillingMode="PAY_PER_REQUEST",
    )


def seeded_sets() -> list[tuple[str, list[dict[str, Any]]]]:
    """(set id, its snapshots by member index), oldest first."""
    found = sorted(sets_of(ARRAY).items(), key=lambda kv: min(s["StartTime"] for s in kv[1]))  # type: ignore[type-var]
    return [
        (sid, sorted(snaps, key=lambda s: tags_of(s)["raidsnap:member-index"]))
        for sid, snaps in found
    ]


def restored_set(account: backends.Backend) -> tuple[int, str]:
    """Restore db1 (latest, in place) through the command: its exit code and the set it took."""
    result = raidsnap(
        account, "restore", ARRAY, "--mode", "replace", "--initialization", "none", "--yes"
    )
    found = re.search(r"^\s*set\s+(\S+)\s*$", result.output, re.MULTILINE)
    return result.exit_code, found.group(1) if found else result.output


@pytest.mark.parametrize("loss", [forget_the_array, a_fresh_table])
def test_adopt_shows_then_records_the_sets_and_the_newest_restores(
    account: backends.Backend, loss: Any
) -> None:
    sets = seeded_sets()
    assert len(sets) == SEEDED
    newest = sets[-1][0]
    md_uuid = tags_of(sets[0][1][0])["raidsnap:md-uuid"]
    # GIVEN the table no longer records the array's sets: a restore is refused, and says why
    loss()
    code, _ = restored_set(account)
    assert code == 1
    # WHEN the operator looks first
    shown = raidsnap(account, "sets", "adopt", ARRAY, "--dry-run")
    # THEN every set is shown as it would be recorded, and nothing is
    assert shown.exit_code == 0, shown.output
    assert f"array {ARRAY}: {SEEDED} sets found by their tags" in shown.output
    for set_id, snaps in sets:
        members = ", ".join(f"{i} {s['SnapshotId']}" for i, s in enumerate(snaps))
        assert f"  {set_id}  to record" in shown.output
        assert f"      members   3: {members}" in shown.output
    assert shown.output.count(f"      md UUID   {md_uuid}") == SEEDED
    assert shown.output.count("      mounted   /data (/dev/md0)") == SEEDED
    assert shown.output.count("      status    complete\n") == SEEDED
    assert "dry run: 3 sets would be recorded; nothing recorded" in shown.output
    assert items() == []
    # AND an operator who says no records nothing
    declined = raidsnap(account, "sets", "adopt", ARRAY, answer="n\n")
    assert declined.exit_code == 1 and "nothing recorded" in declined.output
    assert items() == []
    # WHEN the operator confirms
    done = raidsnap(account, "sets", "adopt", ARRAY, answer="y\n")
    # THEN each set is recorded, marked adopted, and a second run finds nothing to do
    assert done.exit_code == 0, done.output
    assert [line for line in done.output.splitlines() if line.startswith("recorded ")] == [
        f"recorded {set_id}" for set_id, _ in sets
    ]
    assert all("adopted" in item for item in items()) and len(items()) == SEEDED
    again = raidsnap(account, "sets", "adopt", ARRAY, "--yes")
    assert again.exit_code == 0
    assert again.output.count("already recorded") == SEEDED and "nothing to record" in again.output
    # AND the newest adopted set restores as latest
    assert restored_set(account) == (0, newest)


def test_a_forged_set_is_refused_and_nothing_of_it_is_recorded(account: backends.Backend) -> None:
    (oldest, old_snaps), (middle, mid_snaps), (newest, _) = seeded_sets()
    forget_the_array()
    ec2 = boto3.client("ec2")
    # GIVEN one member of the oldest set claims another slot, and one of the middle set
    # another array's md UUID
    ec2.create_tags(
        Resources=[str(old_snaps[1]["SnapshotId"])],
        Tags=[{"Key": "raidsnap:member-index", "Value": "0"}],
    )
    ec2.create_tags(
        Resources=[str(mid_snaps[2]["SnapshotId"])],
        Tags=[{"Key": "raidsnap:md-uuid", "Value": "ffffffff:00000000:11111111:22222222"}],
    )
    # WHEN the operator adopts the array's sets
    result = raidsnap(account, "sets", "adopt", ARRAY, "--yes")
    # THEN both forged sets are refused with the reason, only the newest is recorded
    assert result.exit_code == 1, result.output
    assert f"  {oldest}  refused" in result.output
    claims = ", ".join(sorted(str(s["SnapshotId"]) for s in old_snaps[:2]))
    assert f"slot 0 is claimed by 2 snapshots ({claims})" in result.output
    assert f"  {middle}  refused" in result.output
    assert "the members disagree on raidsnap:md-uuid" in result.output
    assert [item["setId"]["S"] for item in items()] == [newest]
    # AND a restore of a refused set still says it is not recorded; latest takes the newest
    refused = raidsnap(account, "restore", ARRAY, "--set", middle, "--mode", "replace", "--yes")
    assert refused.exit_code == 1 and "raidsnap sets adopt db1" in " ".join(refused.output.split())
    assert restored_set(account) == (0, newest)
