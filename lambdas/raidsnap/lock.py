"""One restore per array at a time: a DynamoDB item per array, written conditionally.

The item names the execution that holds it and the set it restores, so backup retention can
keep that set. A holder that is no longer RUNNING, or whose lease ran out, has lost the lock:
an execution that timed out or was stopped never reaches its own release.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from raidsnap import clients
from raidsnap.aws import error_code
from raidsnap.errors import RestoreInProgressError


@dataclass(frozen=True)
class Holder:
    array: str
    execution_arn: str
    set_id: str
    lease_until: int
    fsr_pairs: tuple[str, ...] = ()


def _holder(item: dict[str, Any]) -> Holder:
    return Holder(
        array=item["array"]["S"],
        execution_arn=item["executionArn"]["S"],
        set_id=item.get("setId", {}).get("S", ""),
        lease_until=int(item.get("leaseUntil", {}).get("N", "0")),
        fsr_pairs=tuple(item.get("fsrPairs", {}).get("SS", [])),
    )


def current(table: str, array: str) -> Holder | None:
    item = (
        clients.dynamodb()
        .get_item(TableName=table, Key={"array": {"S": array}}, ConsistentRead=True)
        .get("Item")
    )
    return _holder(item) if item else None


def running(execution_arn: str) -> bool:
    """Is this execution still running? (A holder that is not may be taken over.)"""
    try:
        status = clients.stepfunctions().describe_execution(executionArn=execution_arn)["status"]
    except ClientError as err:
        if error_code(err) in ("ExecutionDoesNotExist", "InvalidArn"):
            return False
        raise
    return status == "RUNNING"


def acquire(
    table: str, array: str, execution_arn: str, set_id: str, lease_seconds: int
) -> Holder | None:
    """Take the array's lock, or the lock of a holder that is gone; raise if one is running.

    Returns the holder that was taken over, if any (for the run's notes)."""
    now = int(time.time())
    item = {
        "array": {"S": array},
        "executionArn": {"S": execution_arn},
        "setId": {"S": set_id},
        "acquiredAt": {"N": str(now)},
        "leaseUntil": {"N": str(now + lease_seconds)},
        # DynamoDB's TTL removes forgotten items long after any lease has run out.
        "expiresAt": {"N": str(now + 2 * lease_seconds)},
    }
    try:
        clients.dynamodb().put_item(
            TableName=table,
            Item=item,
            ConditionExpression="attribute_not_exists(#a) OR executionArn = :me",
            ExpressionAttributeNames={"#a": "array"},
            ExpressionAttributeValues={":me": {"S": execution_arn}},
        )
    except ClientError as err:
        if error_code(err) != "ConditionalCheckFailedException":
            raise
    else:
        return None
    holder = current(table, array)
    if holder is None:  # released between our two calls: try once more from the start
        return acquire(table, array, execution_arn, set_id, lease_seconds)
    if holder.lease_until > now and running(holder.execution_arn):
        raise RestoreInProgressError(
            f"a restore of {array} is already running ({holder.execution_arn}, set "
            f"{holder.set_id}); wait for it to end, or stop it, then start this restore again"
        )
    try:
        clients.dynamodb().put_item(
            TableName=table,
            Item=item,
            ConditionExpression="executionArn = :holder",
            ExpressionAttributeValues={":holder": {"S": holder.execution_arn}},
        )
    except ClientError as err:
        if error_code(err) == "ConditionalCheckFailedException":
            raise RestoreInProgressError(
                f"another restore of {array} took the lock at the same moment; start this "
                "restore again once it has ended"
            ) from None
        raise
    return holder


def record_fsr(table: str, array: str, execution_arn: str, pairs: list[str]) -> None:
    """Write down the FSR pairs this run is about to enable, before enabling them, so that a
    retried step or the failure path knows them even when EC2's answer was lost."""
    if not pairs:
        return
    clients.dynamodb().update_item(
        TableName=table,
        Key={"array": {"S": array}},
        UpdateExpression="ADD fsrPairs :p",
        ConditionExpression="executionArn = :me",
        ExpressionAttributeValues={":p": {"SS": pairs}, ":me": {"S": execution_arn}},
    )


def release(table: str, array: str, execution_arn: str) -> bool:
    """Drop the lock if this execution holds it; True when it did."""
    try:
        clients.dynamodb().delete_item(
            TableName=table,
            Key={"array": {"S": array}},
            ConditionExpression="executionArn = :me",
            ExpressionAttributeValues={":me": {"S": execution_arn}},
        )
    except ClientError as err:
        if error_code(err) == "ConditionalCheckFailedException":
            return False
        raise
    return True


def sets_held(table: str, array: str) -> set[str]:
    """Sets a restore of this array holds now (a lease that ran out holds nothing)."""
    holder = current(table, array)
    if holder is None or holder.lease_until <= int(time.time()):
        return set()
    return {holder.set_id}
