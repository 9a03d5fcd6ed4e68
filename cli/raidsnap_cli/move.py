"""``raidsnap move ARRAY INSTANCE``: an operator confirms that an array lives on another instance.

A tag alone never moves an array (raidsnap.aws.homes): when the instance tagged with it is not
the one raidsnap recorded, its backups are refused (ArrayInstanceChanged) until someone who may
say so confirms the move. That person runs this; the record names them."""

from __future__ import annotations

import re
from collections.abc import Callable

import boto3
from botocore.exceptions import BotoCoreError, ClientError
from rich.console import Console
from rich.text import Text

from raidsnap import tags
from raidsnap.aws import homes, instances

from .backends import Backend

INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")


class MoveError(Exception):
    """The move cannot be recorded; the message says why and what to do."""


def _caller() -> str:
    """Who confirms the move, as AWS knows them (recorded with it)."""
    try:
        return str(boto3.client("sts").get_caller_identity()["Arn"])
    except (ClientError, BotoCoreError):
        return "an operator whose identity could not be read"


def check(array: str, instance_id: str) -> None:
    """Refuse an instance that cannot be the array's: unknown, gone, or not tagged for it."""
    if not INSTANCE_ID.match(instance_id):
        raise MoveError(f"{instance_id!r} is not an instance id (i- and 8 to 17 hex digits)")
    state, found = instances.instance_facts(instance_id)
    if state in instances.GONE_STATES:
        raise MoveError(
            f"{instance_id} is {'not known in this region' if state == 'unknown' else state}: "
            f"{array} cannot live there"
        )
    held = found.get(tags.ARRAY)
    if held != array:
        now = f"carries {tags.ARRAY}={held}" if held else f"carries no {tags.ARRAY} tag"
        raise MoveError(
            f"{instance_id} {now}: tag it {tags.ARRAY}={array} first (the tag says where the "
            "array is; this command confirms that raidsnap may follow it), then run this again"
        )


def move(
    backend: Backend,
    array: str,
    instance_id: str,
    *,
    confirm: Callable[[str], bool],
    out: Console,
) -> bool:
    """Record ``instance_id`` as the array's instance after showing what changes; False when
    the operator said no (nothing recorded)."""
    backend.read_sets()
    table = backend.lock_table()
    check(array, instance_id)
    home = homes.recorded(table, array)
    if home is not None and home.instance_id == instance_id:
        out.print(f"{array} is already recorded on {instance_id}; nothing to do")
        return True
    was = (
        f"{array} is recorded on {home.instance_id} (since "
        f"{home.since.strftime('%Y-%m-%d %H:%M UTC')}, {home.by})"
        if home is not None
        else f"{array} has no recorded instance yet"
    )
    out.print(was)
    out.print(
        f"From now on {array} lives on {instance_id}: its backups are taken there, a restore "
        f"without a target goes there"
        + (f", and {home.instance_id} is no longer {array}'s" if home else "")
        + "."
    )
    if not confirm(f"Record {instance_id} as {array}'s instance?"):
        out.print("nothing recorded")
        return False
    homes.record_move(table, array, instance_id, f"operator {_caller()}")
    out.print(Text(f"recorded: {array} lives on {instance_id}", style="green"))
    out.print(f"next: take a backup there: raidsnap backup {array}")
    return True
