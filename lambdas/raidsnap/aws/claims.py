"""An array's recovery claim: one recovery of an array at a time.

The claim is an item of the restore-lock table under ``<array>#recovery`` (array names never
hold "#": no clash with a restore lock's item), held by the execution's name until it ends.
"""

from __future__ import annotations

import time

from botocore.exceptions import ClientError

from raidsnap import clients
from raidsnap.aws import error_code, lock
from raidsnap.aws.executions import arn_of

CLAIM_SUFFIX = "#recovery"
# DynamoDB's TTL removes a claim its execution (73 hours at most) never gave back.
CLAIM_TTL_SECONDS = 4 * 86400


def claim(table: str, array: str, name: str, machine_arn: str) -> str | None:
    """Claim the array's recovery for execution ``name`` (idempotent for the same name); returns
    the execution that holds it instead, if one still runs."""
    ddb = clients.dynamodb()
    now = int(time.time())
    item = {
        "array": {"S": array + CLAIM_SUFFIX},
        "executionName": {"S": name},
        "claimedAt": {"N": str(now)},
        "expiresAt": {"N": str(now + CLAIM_TTL_SECONDS)},
    }
    try:
        ddb.put_item(
            TableName=table,
            Item=item,
            ConditionExpression="attribute_not_exists(#a) OR executionName = :me",
            ExpressionAttributeNames={"#a": "array"},
            ExpressionAttributeValues={":me": {"S": name}},
        )
    except ClientError as err:
        if error_code(err) != "ConditionalCheckFailedException":
            raise
    else:
        return None
    holder = claimed_by(table, array)
    holder_arn = arn_of(machine_arn, holder)
    if holder and lock.running(holder_arn):
        return holder_arn
    try:  # the holder ended without giving the claim back (stopped, timed out): take it over
        ddb.put_item(
            TableName=table,
            Item=item,
            ConditionExpression="executionName = :old",
            ExpressionAttributeValues={":old": {"S": holder}},
        )
    except ClientError as err:
        if error_code(err) == "ConditionalCheckFailedException":
            return "another recovery that started at the same moment"
        raise
    return None


def claimed_by(table: str, array: str) -> str:
    """The execution name holding the array's recovery claim ("" when none does)."""
    held = (
        clients.dynamodb()
        .get_item(TableName=table, Key={"array": {"S": array + CLAIM_SUFFIX}}, ConsistentRead=True)
        .get("Item")
        or {}
    )
    return str(held.get("executionName", {}).get("S", ""))


def unclaim(table: str, array: str, name: str) -> None:
    lock.delete_if_held(table, array + CLAIM_SUFFIX, "executionName", name)
