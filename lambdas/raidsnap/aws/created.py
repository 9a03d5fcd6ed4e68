"""Each restore run's own record of the volumes it created: what its cleanups may delete.

A volume's tags prove nothing about who created it: anyone allowed ec2:CreateTags can put a
run's execution ARN and nonce on a volume of their own. So the run writes down each volume id
CreateVolume gave it, in the restore lock table, the moment it has it; the run's failure path,
the cleanup after a stopped run and the sweeper delete only volumes in that record (and only
when the tags agree as well). A volume the record does not name is reported, never deleted.

One item per run, keyed "created#<execution ARN>#<run nonce>" in the table's key attribute
(array names never contain "#", nor do execution names: Step Functions refuses it in a name), so
a later execution of the same name (names are reused after 90 days) has a record of its own.
Ids are added with UpdateItem ADD to a string set: adding an id already there changes nothing
(DynamoDB Developer Guide, "Update expressions", ADD: "If the existing data type is a set ...
the value is added to the set"; a set holds each value once), so a retried step records each
id once. The item carries no expiry: the sweeper drops it once its run has ended and nothing of
it is left to remove (a run's own cleanup drops it sooner, when it removed everything).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from raidsnap import clients
from raidsnap.aws import lock

CREATED_KEY_PREFIX = "created#"


@dataclass(frozen=True)
class Created:
    execution_arn: str
    run: str
    volume_ids: frozenset[str]


def _key(execution_arn: str, run: str) -> dict[str, Any]:
    return {"array": {"S": f"{CREATED_KEY_PREFIX}{execution_arn}#{run}"}}


def _created(item: dict[str, Any]) -> Created:
    arn, _, run = item["array"]["S"].removeprefix(CREATED_KEY_PREFIX).rpartition("#")
    return Created(arn, run, frozenset(item.get("volumeIds", {}).get("SS", [])))


def record(table: str, execution_arn: str, run: str, volume_ids: list[str]) -> None:
    """Add these volumes to the run's record (idempotent: a set holds each id once)."""
    if not volume_ids:
        return
    clients.dynamodb().update_item(
        TableName=table,
        Key=_key(execution_arn, run),
        UpdateExpression="SET recordedAt = if_not_exists(recordedAt, :t) ADD volumeIds :v",
        ExpressionAttributeValues={
            ":t": {"N": str(int(time.time()))},
            ":v": {"SS": sorted(set(volume_ids))},
        },
    )


def recorded(table: str, execution_arn: str, run: str) -> frozenset[str]:
    """The volumes this run recorded creating (none when it recorded nothing, or no run)."""
    if not execution_arn or not run:
        return frozenset()
    item = (
        clients.dynamodb()
        .get_item(TableName=table, Key=_key(execution_arn, run), ConsistentRead=True)
        .get("Item")
    )
    return _created(item).volume_ids if item else frozenset()


def records(table: str) -> list[Created]:
    """Every run's record (the table also holds locks, backup holds and FSR claims)."""
    return [_created(item) for item in lock.scan_prefixed(table, CREATED_KEY_PREFIX)]


def drop(table: str, execution_arn: str, run: str) -> None:
    """Forget the run's record: call only once nothing it names is left to remove."""
    if execution_arn and run:
        clients.dynamodb().delete_item(TableName=table, Key=_key(execution_arn, run))
