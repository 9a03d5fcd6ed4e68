"""What raidsnap recorded for each set when it took it: the set's manifest.

A snapshot belongs to a set only if the set's manifest lists it. Tags cannot say so: anyone
allowed to tag snapshots can write raidsnap's tags, and tools that copy a volume's tags onto
their own snapshots (Data Lifecycle Manager's copy-tags, the console's "copy tags from source
volume") do so without asking. The manifests live in a DynamoDB table that only the backup's
own functions may write, keyed by array and set id, and outlive the stack (the table is
retained) as long as the snapshots may.

An item is written in two steps. Before CreateSnapshots: the member volumes by slot, the
execution and its start ("taking"). After: the snapshot id of each slot and the time EC2 gave
the snapshots ("taken"). A step retried after CreateSnapshots succeeded but its answer was lost
finds its snapshots by the execution tag, and accepts only snapshots of the recorded volumes
started after the execution did.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from raidsnap import clients
from raidsnap.aws import error_code
from raidsnap.environment import snapshot_sets_table
from raidsnap.sets import Manifest

_SERIALIZE = TypeSerializer()
_DESERIALIZE = TypeDeserializer()


def _iso(value: datetime) -> str:
    return value.isoformat()


def _to_item(m: Manifest) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "array": m.array,
        "setId": m.set_id,
        "executionArn": m.execution_arn,
        "status": m.status,
        "memberCount": m.member_count,
        "volumes": {str(k): v for k, v in m.volumes.items()},
        "snapshots": {str(k): v for k, v in m.snapshots.items()},
        "degraded": m.degraded,
        "missingSlots": list(m.missing_slots),
        "consistency": m.consistency,
    }
    if m.md:
        raw["md"] = dict(m.md)
    if m.instance_id:
        raw["instanceId"] = m.instance_id
    if m.started is not None:
        raw["started"] = _iso(m.started)
    if m.adopted:
        raw["adopted"] = m.adopted
    return {k: _SERIALIZE.serialize(v) for k, v in raw.items()}


def _from_item(item: Mapping[str, Any]) -> Manifest:
    raw = {k: _DESERIALIZE.deserialize(v) for k, v in item.items()}
    started = raw.get("started")
    return Manifest(
        array=str(raw["array"]),
        set_id=str(raw["setId"]),
        execution_arn=str(raw.get("executionArn", "")),
        status="taken" if raw.get("status") == "taken" else "taking",
        member_count=int(raw.get("memberCount", 0)),
        volumes={int(k): str(v) for k, v in (raw.get("volumes") or {}).items()},
        snapshots={int(k): str(v) for k, v in (raw.get("snapshots") or {}).items()},
        started=datetime.fromisoformat(str(started)) if started else None,
        degraded=bool(raw.get("degraded", False)),
        missing_slots=tuple(int(s) for s in raw.get("missingSlots") or []),
        consistency=str(raw.get("consistency", "crash")),
        md={str(k): str(v) for k, v in (raw.get("md") or {}).items()},
        instance_id=str(raw.get("instanceId", "")),
        adopted=str(raw.get("adopted", "")),
    )


def _key(array: str, set_id: str) -> dict[str, Any]:
    return {"array": {"S": array}, "setId": {"S": set_id}}


def get(array: str, set_id: str) -> Manifest | None:
    item = (
        clients.dynamodb()
        .get_item(TableName=snapshot_sets_table(), Key=_key(array, set_id), ConsistentRead=True)
        .get("Item")
    )
    return _from_item(item) if item else None


def of_array(array: str) -> list[Manifest]:
    return list(_pages("query", {
        "KeyConditionExpression": "#a = :a",
        "ExpressionAttributeNames": {"#a": "array"},
        "ExpressionAttributeValues": {":a": {"S": array}},
        "ConsistentRead": True,
    }))  # fmt: skip


def every() -> list[Manifest]:
    """Every manifest of every array (the table holds a few items per array)."""
    return list(_pages("scan", {"ConsistentRead": True}))


def _pages(operation: str, params: dict[str, Any]) -> Iterator[Manifest]:
    paginator = clients.dynamodb().get_paginator(operation)
    for page in paginator.paginate(TableName=snapshot_sets_table(), **params):
        for item in page.get("Items", []):
            yield _from_item(item)


def begin(manifest: Manifest) -> Manifest:
    """Record the intent (status taking) unless this execution already did; returns what is
    recorded now, which is the earlier record after a retry."""
    try:
        clients.dynamodb().put_item(
            TableName=snapshot_sets_table(),
            Item=_to_item(manifest),
            ConditionExpression="attribute_not_exists(setId)",
        )
    except ClientError as err:
        if error_code(err) != "ConditionalCheckFailedException":
            raise
        found = get(manifest.array, manifest.set_id)
        if found is None or found.execution_arn != manifest.execution_arn:
            raise RuntimeError(
                f"set id {manifest.set_id} of {manifest.array} is recorded for another "
                f"execution ({found.execution_arn if found else 'gone'})"
            ) from None
        return found
    return manifest


def complete(manifest: Manifest, snapshots: Mapping[int, str], started: datetime) -> Manifest:
    """Record the snapshot of each slot: from now on these, and only these, are the set."""
    done = replace(manifest, status="taken", snapshots=dict(snapshots), started=started)
    clients.dynamodb().put_item(
        TableName=snapshot_sets_table(),
        Item=_to_item(done),
        ConditionExpression="executionArn = :me",
        ExpressionAttributeValues={":me": {"S": manifest.execution_arn}},
    )
    return done


def adopt(manifest: Manifest) -> Manifest | None:
    """Record a set rebuilt from its snapshots' tags, as a backup records one, unless its set id
    is recorded already: then nothing is written and the recorded manifest is returned."""
    try:
        clients.dynamodb().put_item(
            TableName=snapshot_sets_table(),
            Item=_to_item(manifest),
            ConditionExpression="attribute_not_exists(setId)",
        )
    except ClientError as err:
        if error_code(err) != "ConditionalCheckFailedException":
            raise
        return get(manifest.array, manifest.set_id)
    return None


def forget(manifest: Manifest) -> None:
    """Drop the record of a set whose snapshots are all gone."""
    clients.dynamodb().delete_item(
        TableName=snapshot_sets_table(), Key=_key(manifest.array, manifest.set_id)
    )
