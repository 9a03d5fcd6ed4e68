"""Backups waiting for their snapshots: one item per set in the restore lock table, under
"snapshots#<array>#<set id>", holding the waiting Task's token and what its check needs.

The backup's AwaitSnapshots Task waits on its task token (``lambda:invoke.waitForTaskToken``)
instead of looking at its snapshots every few minutes. EBS sends "EBS Multi-Volume Snapshots
Completion Status" (``createSnapshots``, ``succeeded`` or ``failed``) to EventBridge when the
CreateSnapshots call's snapshots are done (Amazon EBS User Guide, "Amazon EventBridge events for
Amazon EBS"); the event names the snapshots, not the run, so the run writes its token down under
each of its sets, with one small item per snapshot ("snapshot#<snapshot id>") naming its set's
item: the event's snapshot ids lead to the token with DynamoDB alone, so that EC2 throttling
when a fleet's snapshots complete together cannot lose the event before the run is found. The
token never
travels in a tag or an input: only raidsnap's functions write this table (raidsnap.aws.awaited
says why that matters for SendTaskSuccess, which takes no resource). DynamoDB's TTL removes an
item its run never took back (a run stopped while it waited)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from raidsnap import clients

KEY_PREFIX = "snapshots#"
SNAPSHOT_PREFIX = "snapshot#"
# The Task gives up on the event after an hour (statemachines/backup.asl.json, AwaitSnapshots);
# the item is of no use past that. A day leaves room for a redriven run.
TTL_SECONDS = 86400


@dataclass(frozen=True)
class Waiting:
    """The run waiting on a set: its Task's token and the check it gave (plan and snapshots)."""

    token: str
    call: dict[str, Any]


def _key(array: str, set_id: str) -> dict[str, Any]:
    return {"array": {"S": f"{KEY_PREFIX}{array}#{set_id}"}}


def expect(
    table: str,
    sets: list[tuple[str, str]],
    snapshot_ids: list[str],
    token: str,
    call: dict[str, Any],
) -> None:
    """Write down, under every set of the run's CreateSnapshots call, who waits and with which
    token, and under each of its snapshots which set's item that is. A retried Task writes its
    own token over the last one. The snapshots' items are left to TTL."""
    body = json.dumps(call, separators=(",", ":"))
    expires = {"N": str(int(time.time()) + TTL_SECONDS)}
    first = _key(*sets[0])["array"]
    for array, set_id in sets:
        clients.dynamodb().put_item(
            TableName=table,
            Item={
                **_key(array, set_id),
                "taskToken": {"S": token},
                "call": {"S": body},
                "expiresAt": expires,
            },
        )
    for snapshot_id in snapshot_ids:
        clients.dynamodb().put_item(
            TableName=table,
            Item={
                "array": {"S": SNAPSHOT_PREFIX + snapshot_id},
                "wait": first,
                "expiresAt": expires,
            },
        )


def _get(table: str, key: str) -> dict[str, Any] | None:
    item = (
        clients.dynamodb()
        .get_item(TableName=table, Key={"array": {"S": key}}, ConsistentRead=True)
        .get("Item")
    )
    return item or None


def waiting_on(table: str, snapshot_ids: list[str]) -> Waiting | None:
    """The run waiting on the set one of these snapshots belongs to, if one still waits."""

    for snapshot_id in snapshot_ids:
        pointer = _get(table, SNAPSHOT_PREFIX + snapshot_id)
        key = str((pointer or {}).get("wait", {}).get("S", ""))
        item = _get(table, key) if key.startswith(KEY_PREFIX) else None
        if item is not None:
            return _waiting(item)
    return None


def _waiting(item: dict[str, Any]) -> Waiting:
    call = json.loads(item.get("call", {}).get("S", "{}"))
    return Waiting(token=str(item["taskToken"]["S"]), call=call if isinstance(call, dict) else {})


def done(table: str, sets: list[tuple[str, str]]) -> None:
    """No one waits on these sets any more."""
    for array, set_id in sets:
        clients.dynamodb().delete_item(TableName=table, Key=_key(array, set_id))
