"""``raidsnap move``: what an operator sees when confirming that an array lives elsewhere, and
that a backup refused because of a tag alone goes through once the move is confirmed."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path

import boto3
import pytest
from rich.console import Console

from raidsnap_cli import backends, move
from raidsnap_emulation import backend as emulated

ARRAY = "db1"


@pytest.fixture
def account(template: Path) -> Iterator[backends.Backend]:
    """The emulated account of ``--emulation --seed-backups 1``: db1 on its instance, one set."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(emulated, "account", partial(emulated.account, template=template))
        patch.setattr(boto3, "DEFAULT_SESSION", boto3.DEFAULT_SESSION)
        with backends.emulation(seed_backups=1) as found:
            yield found


def db1_instance() -> str:
    ec2 = boto3.client("ec2")
    found = ec2.describe_instances(Filters=[{"Name": "tag:raidsnap:array", "Values": [ARRAY]}])[
        "Reservations"
    ]
    return str(found[0]["Instances"][0]["InstanceId"])


def new_instance(tag: str | None) -> str:
    tags = [{"Key": "Name", "Value": "new"}] + (
        [{"Key": "raidsnap:array", "Value": tag}] if tag else []
    )
    return str(
        boto3.client("ec2").run_instances(
            ImageId="ami-0abcdef1234567890",
            MinCount=1,
            MaxCount=1,
            InstanceType="r6i.2xlarge",
            Placement={"AvailabilityZone": "us-east-1a"},
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )["Instances"][0]["InstanceId"]
    )


def screen() -> Console:
    return Console(record=True, width=200, force_terminal=False)


def test_move_shows_what_changes_asks_and_records_who_moved_it(
    account: backends.Backend,
) -> None:
    old = db1_instance()
    boto3.client("ec2").stop_instances(InstanceIds=[old])
    new = new_instance(ARRAY)
    out = screen()
    asked: list[str] = []

    done = move.move(account, ARRAY, new, confirm=lambda q: asked.append(q) or True, out=out)

    text = out.export_text()
    assert done
    assert f"db1 is recorded on {old} (since " in text and ", set db1-" in text
    assert f"From now on db1 lives on {new}: its backups are taken there" in text
    assert f"and {old} is no longer db1's." in text
    assert asked == [f"Record {new} as db1's instance?"]
    assert f"recorded: db1 lives on {new}" in text
    assert "next: take a backup there: raidsnap backup db1" in text
    again = screen()
    assert move.move(account, ARRAY, new, confirm=lambda q: False, out=again)
    assert f"db1 is already recorded on {new}; nothing to do" in again.export_text()


def test_move_declined_records_nothing(account: backends.Backend) -> None:
    old = db1_instance()
    new = new_instance(ARRAY)
    out = screen()
    assert not move.move(account, ARRAY, new, confirm=lambda q: False, out=out)
    assert "nothing recorded" in out.export_text()
    check = screen()
    move.move(account, ARRAY, old, confirm=lambda q: False, out=check)
    assert f"db1 is already recorded on {old}" in check.export_text()


@pytest.mark.parametrize(
    ("tag", "message"),
    [
        (None, "carries no raidsnap:array tag: tag it raidsnap:array=db1 first"),
        ("payments", "carries raidsnap:array=payments: tag it raidsnap:array=db1 first"),
    ],
)
def test_move_refuses_an_instance_not_tagged_for_the_array(
    account: backends.Backend, tag: str | None, message: str
) -> None:
    new = new_instance(tag)
    with pytest.raises(move.MoveError, match=message):
        move.move(account, ARRAY, new, confirm=lambda q: True, out=screen())


def test_move_refuses_an_unknown_or_terminated_instance(account: backends.Backend) -> None:
    with pytest.raises(move.MoveError, match="not known in this region"):
        move.move(account, ARRAY, "i-0123456789abcdef0", confirm=lambda q: True, out=screen())
    gone = new_instance(ARRAY)
    boto3.client("ec2").terminate_instances(InstanceIds=[gone])
    with pytest.raises(move.MoveError, match="db1 cannot live there"):
        move.move(account, ARRAY, gone, confirm=lambda q: True, out=screen())
