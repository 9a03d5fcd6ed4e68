"""A restore that a workflow waits on: the waiting workflow's record of it, in the restore lock
table, under the restore's own execution name.

A recovery starts its restore from a Task that waits for its task token (``lambda:invoke.
waitForTaskToken``). The token never travels in the restore's input: raidsnap's functions may
answer any token in the account (SendTaskSuccess and SendTaskFailure take no resource, Service
Authorization Reference), so whoever may start a restore could otherwise have them end, or
falsely succeed, another array's recovery with a token read where it is shown. Instead the
recovery writes the item "callback#<restore execution name>" before it starts the restore: its
Task's token, its own execution ARN, the array and a digest of the input it starts the restore
with. Only raidsnap's functions write this table. The restore's report and the rule on its end
read the item by their own execution's name, and answer only when the array and the input are
the ones the recovery started; a restore of that name started by anyone else, with any other
input, answers no one.

The restore also writes back what it reached: that its array is mounted (with its report), or
that it failed (with the volumes its cleanup kept on the target). A recovery that heard
nothing (an answer Step Functions refused) reads that instead. The recovery removes the item
when it ends; DynamoDB's TTL removes one it never could.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from raidsnap import clients
from raidsnap.aws import error_code
from raidsnap.observability import logger

KEY_PREFIX = "callback#"
# A recovery waits 73 hours at most (lib/constructs/recovery.ts); TTL removes the item later.
TTL_SECONDS = 4 * 86400
MOUNTED = "mounted"
FAILED = "failed"


@dataclass(frozen=True)
class Awaited:
    """The waiting workflow's record of one restore (and what the restore wrote back)."""

    restore_name: str
    token: str
    parent_arn: str
    array: str
    input_digest: str
    outcome: str = ""
    report: dict[str, Any] | None = None
    kept: tuple[str, ...] = ()
    error: str = ""
    cause: str = ""

    def started(self, array: str | None, restore_input: Any) -> bool:
        """Is this the restore the parent started: its array, and the very input it sent?"""
        return bool(array) and array == self.array and digest(restore_input) == self.input_digest


def digest(restore_input: Any) -> str:
    """A digest of a restore's input that does not depend on how its JSON text is spaced or its
    keys ordered: each reader gets the input back as parsed JSON (a Task's Parameters, the end
    event's detail, DescribeExecution)."""
    text = json.dumps(restore_input, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _key(restore_name: str) -> dict[str, Any]:
    return {"array": {"S": KEY_PREFIX + restore_name}}


def expect(
    table: str, restore_name: str, *, token: str, parent_arn: str, array: str, restore_input: Any
) -> None:
    """Write down, before the restore starts, who waits on it and with which token. A retried
    step writes its own Task's token over the last one (the restore answers whoever waits now)
    and keeps anything the restore wrote back."""
    _set(
        table,
        restore_name,
        {
            "taskToken": {"S": token},
            "parentArn": {"S": parent_arn},
            "arrayName": {"S": array},
            "inputDigest": {"S": digest(restore_input)},
            "expiresAt": {"N": str(int(time.time()) + TTL_SECONDS)},
        },
    )


def awaited(table: str, restore_name: str) -> Awaited | None:
    item = (
        clients.dynamodb()
        .get_item(TableName=table, Key=_key(restore_name), ConsistentRead=True)
        .get("Item")
    )
    if not item:
        return None

    def text(name: str) -> str:
        return str(item.get(name, {}).get("S", ""))

    report = json.loads(text("report")) if text("report") else None
    return Awaited(
        restore_name=restore_name,
        token=text("taskToken"),
        parent_arn=text("parentArn"),
        array=text("arrayName"),
        input_digest=text("inputDigest"),
        outcome=text("outcome"),
        report=report if isinstance(report, dict) else None,
        kept=tuple(sorted(item.get("kept", {}).get("SS", []))),
        error=text("error"),
        cause=text("cause"),
    )


def name_of(execution_arn: str) -> str:
    return execution_arn.rsplit(":", 1)[-1]


def parent_of(
    table: str, execution_arn: str, array: str | None, restore_input: Any
) -> Awaited | None:
    """Who waits on this restore (the run itself, by its own execution ARN), if anyone does and
    the run is the one it started."""
    waiting = awaited(table, name_of(execution_arn))
    if waiting is None:
        return None
    if not waiting.token or not waiting.started(array, restore_input):
        logger.warning(
            "a workflow waits on a restore of this name, but not on this run: not told",
            extra={"execution": execution_arn, "array": array, "waiting_for": waiting.array},
        )
        return None
    return waiting


def record_mounted(table: str, restore_name: str, report: dict[str, Any]) -> None:
    """The restore's array is assembled and mounted: its report, for a parent that hears
    nothing else."""
    _write_back(
        table,
        restore_name,
        {"outcome": {"S": MOUNTED}, "report": {"S": json.dumps(report, sort_keys=True)}},
    )


def record_failed(table: str, restore_name: str, kept: list[str], error: str, cause: str) -> None:
    """The restore failed (its error and cause) and its cleanup is done; ``kept``: its volumes
    it left on the target (an md device or a mount uses them: the array may be there)."""
    values: dict[str, Any] = {
        "outcome": {"S": FAILED},
        "error": {"S": error or "RestoreFailed"},
        # A cause is at most 32,768 characters (SendTaskFailure); an item holds 400 KB.
        "cause": {"S": (cause or "-")[:32768]},
    }
    if kept:
        values["kept"] = {"SS": sorted(set(kept))}
    _write_back(table, restore_name, values)


def _write_back(table: str, restore_name: str, values: dict[str, Any]) -> None:
    """Only onto the item the parent wrote: one it removed already waits for nothing."""
    try:
        _set(table, restore_name, values, condition="attribute_exists(#k)")
    except ClientError as err:
        if error_code(err) != "ConditionalCheckFailedException":
            raise
        logger.info("no workflow waits on the restore any more", extra={"restore": restore_name})


def _set(table: str, restore_name: str, values: dict[str, Any], condition: str = "") -> None:
    """One UpdateItem that sets these attributes (every name through ExpressionAttributeNames:
    no clash with DynamoDB's reserved words)."""
    names = {f"#a{i}": name for i, name in enumerate(values)}
    assignments = ", ".join(f"#a{i} = :v{i}" for i in range(len(values)))
    extra: dict[str, Any] = {"ConditionExpression": condition} if condition else {}
    clients.dynamodb().update_item(
        TableName=table,
        Key=_key(restore_name),
        UpdateExpression=f"SET {assignments}",
        ExpressionAttributeNames=names | ({"#k": "array"} if condition else {}),
        ExpressionAttributeValues={f":v{i}": v for i, v in enumerate(values.values())},
        **extra,
    )


def forget(table: str, restore_name: str) -> None:
    """The parent ended: nothing waits on the restore any more."""
    clients.dynamodb().delete_item(TableName=table, Key=_key(restore_name))
