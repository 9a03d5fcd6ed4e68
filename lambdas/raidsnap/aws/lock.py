"""One restore per array at a time: a DynamoDB item per array, written conditionally.

The item names the execution that holds it and the set it restores, so backup retention can
keep that set. A holder that is no longer RUNNING, or whose lease ran out, has lost the lock:
an execution that timed out or was stopped never reaches its own release.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from raidsnap import clients
from raidsnap.aws import error_code
from raidsnap.errors import BackupInProgressError, RestoreInProgressError


@dataclass(frozen=True)
class Holder:
    array: str
    execution_arn: str
    set_id: str
    lease_until: int


def _holder(item: dict[str, Any]) -> Holder:
    return Holder(
        array=item["array"]["S"],
        execution_arn=item["executionArn"]["S"],
        set_id=item.get("setId", {}).get("S", ""),
        lease_until=int(item.get("leaseUntil", {}).get("N", "0")),
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
    return status(execution_arn) == "RUNNING"


def status(execution_arn: str) -> str:
    """RUNNING, SUCCEEDED, FAILED, TIMED_OUT, ABORTED (or PENDING_REDRIVE); GONE when Step
    Functions no longer knows the execution (its history is kept 90 days)."""
    return describe(execution_arn)[0]


def describe(execution_arn: str) -> tuple[str, datetime | None]:
    """The execution's status (as ``status`` gives it) and its start date (None when GONE)."""
    try:
        found = clients.stepfunctions().describe_execution(executionArn=execution_arn)
    except ClientError as err:
        if error_code(err) in ("ExecutionDoesNotExist", "InvalidArn"):
            return "GONE", None
        raise
    return str(found["status"]), found.get("startDate")


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
        raise _in_progress(array, holder)
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


def _in_progress(array: str, holder: Holder) -> RestoreInProgressError:
    return RestoreInProgressError(
        f"a restore of {array} is already running ({holder.execution_arn}, set "
        f"{holder.set_id}); wait for it to end, or stop it, then start this restore again"
    )


def refuse_while_held(table: str, array: str) -> None:
    """Raise RestoreInProgress while a running restore holds the array's lock, as ``acquire``
    would, without taking it (a restore's plan, shown before it starts)."""
    holder = current(table, array)
    if (
        holder is not None
        and holder.lease_until > int(time.time())
        and running(holder.execution_arn)
    ):
        raise _in_progress(array, holder)


def release(table: str, array: str, execution_arn: str) -> bool:
    """Drop the lock if this execution holds it; True when it did."""
    return delete_if_held(table, array, "executionArn", execution_arn)


def delete_if_held(table: str, key: str, holder_attribute: str, holder: str) -> bool:
    """Delete the item under ``key`` only while ``holder`` holds it (one conditional DeleteItem:
    a holder that lost the item to a takeover never deletes the new holder's); True when it did."""
    try:
        clients.dynamodb().delete_item(
            TableName=table,
            Key={"array": {"S": key}},
            ConditionExpression=f"{holder_attribute} = :me",
            ExpressionAttributeValues={":me": {"S": holder}},
        )
    except ClientError as err:
        if error_code(err) == "ConditionalCheckFailedException":
            return False
        raise
    return True


def sets_held(table: str, array: str, alive: Callable[[str], bool] | None = None) -> set[str]:
    """Sets a restore of this array holds now (a lease that ran out holds nothing). With
    ``alive`` (is this execution RUNNING?), a holder that has ended holds nothing either: a
    run whose own release failed leaves its item until the lease runs out (days)."""
    holder = current(table, array)
    if holder is None or holder.lease_until <= int(time.time()):
        return set()
    if alive is not None and not alive(holder.execution_arn):
        return set()
    return {holder.set_id}


# ---------------------------------------------------------------------- backup holds
#
# A backup of an array holds it from before discovery until its snapshots are taken and the
# filesystem thawed: a restore must not replace members a backup is snapshotting, nor a backup
# snapshot members a restore is replacing. Each side writes its own hold first and then reads
# the other's (consistent reads), so of a backup and a restore that start together at least one
# sees the other.
#
# Holds are per run: the item keyed "backup#<array>" carries a map `holds` from each holding
# execution's ARN to the end of its lease. A run adds and removes only its own entry (UpdateItem
# on one map element: DynamoDB applies each UpdateItem atomically, and SET/REMOVE of a nested
# path touch that element only; DynamoDB developer guide, "Update expressions"), so a second
# backup of the array neither overwrites nor ends the first one's hold, and a restore is refused
# while any entry's lease runs.

BACKUP_KEY_PREFIX = "backup#"


@dataclass(frozen=True)
class BackupHold:
    execution_arn: str
    lease_until: int


def _backup_key(array: str) -> dict[str, Any]:
    return {"array": {"S": BACKUP_KEY_PREFIX + array}}


def hold_for_backup(table: str, array: str, execution_arn: str, lease_seconds: int) -> None:
    """Hold the array for this backup run; raise RestoreInProgress (holding nothing) when a
    running restore holds its lock."""
    now = int(time.time())
    ddb = clients.dynamodb()
    # The map must exist before one of its elements can be set (a SET on a path under a missing
    # attribute fails with ValidationException); if_not_exists keeps other runs' entries.
    ddb.update_item(
        TableName=table,
        Key=_backup_key(array),
        UpdateExpression="SET holds = if_not_exists(holds, :none)",
        ExpressionAttributeValues={":none": {"M": {}}},
    )
    ddb.update_item(
        TableName=table,
        Key=_backup_key(array),
        UpdateExpression="SET holds.#me = :lease, expiresAt = :expires",
        ExpressionAttributeNames={"#me": execution_arn},
        ExpressionAttributeValues={
            ":lease": {"N": str(now + lease_seconds)},
            # DynamoDB's TTL removes a forgotten item long after any lease in it has run out;
            # every new hold pushes it further.
            ":expires": {"N": str(now + 2 * lease_seconds)},
        },
    )
    holder = current(table, array)
    if holder is not None and holder.lease_until > now and running(holder.execution_arn):
        release_backup(table, array, execution_arn)
        raise RestoreInProgressError(
            f"a restore of {array} is running ({holder.execution_arn}, set {holder.set_id}): "
            "this backup took no set and sent nothing to the instance, as the restore may be "
            "replacing the members. The next scheduled backup runs as usual; start one by hand "
            "once the restore has ended if this one is needed"
        )


def release_backup(table: str, array: str, execution_arn: str) -> bool:
    """Drop this run's hold (and only this run's); True when it held the array."""
    try:
        clients.dynamodb().update_item(
            TableName=table,
            Key=_backup_key(array),
            UpdateExpression="REMOVE holds.#me",
            ConditionExpression="attribute_exists(holds.#me)",
            ExpressionAttributeNames={"#me": execution_arn},
        )
    except ClientError as err:
        if error_code(err) == "ConditionalCheckFailedException":
            return False
        raise
    return True


def backup_holds(table: str, array: str) -> list[BackupHold]:
    """The backup runs that hold the array now (a lease that ran out holds nothing)."""
    item = (
        clients.dynamodb()
        .get_item(TableName=table, Key=_backup_key(array), ConsistentRead=True)
        .get("Item")
    )
    now = int(time.time())
    entries = (item or {}).get("holds", {}).get("M", {})
    holds = [BackupHold(arn, int(v.get("N", "0"))) for arn, v in entries.items()]
    return sorted((h for h in holds if h.lease_until > now), key=lambda h: h.lease_until)


def refuse_while_backup_holds(table: str, array: str) -> None:
    """Raise BackupInProgress while any backup run holds the array: its lease has not run out,
    and it still runs. A backup that failed lets go itself; one stopped by hand runs no state
    after it (StopExecution), and its lease, as long as its snapshot step may be retried, would
    hold restores back for hours: asked of Step Functions (DescribeExecution), it holds nothing."""
    holds = [h for h in backup_holds(table, array) if running(h.execution_arn)]
    if not holds:
        return
    now = int(time.time())
    runs = ", ".join(h.execution_arn for h in holds)
    latest = max(h.lease_until for h in holds)
    raise BackupInProgressError(
        f"a backup of {array} is taking its snapshots ({runs}); a restore now could replace "
        "the members under it. Nothing was changed: start this restore again once that backup "
        f"has taken its snapshots (its hold ends at the latest in {latest - now} s)"
    )


# ---------------------------------------------------------------------- FSR ownership
#
# Which Fast Snapshot Restore pairs (snapshot@zone) each restore execution enabled, in an item of
# its own per execution: the lock item is replaced when a lock is taken over, and what a
# preempted run enabled must outlive that. Items are keyed "fsr#<execution ARN>" in the lock
# table's key attribute (array names never contain "#"), carry no expiry (FSR costs by the
# hour until someone turns it off), and are removed by the sweeper once their run has ended and
# its pairs are off.

FSR_KEY_PREFIX = "fsr#"


@dataclass(frozen=True)
class FsrClaim:
    execution_arn: str
    array: str
    pairs: tuple[str, ...]
    # pair -> EnablingTime EC2 gave when this run enabled it: a pair enabled again later (by
    # anyone) has another, and is not this run's.
    enabled_at: dict[str, str]


def _fsr_key(execution_arn: str) -> dict[str, Any]:
    return {"array": {"S": FSR_KEY_PREFIX + execution_arn}}


def _claim(item: dict[str, Any]) -> FsrClaim:
    enabled = {}
    for entry in item.get("enabled", {}).get("SS", []):
        pair, _, when = entry.partition("|")
        enabled[pair] = when
    return FsrClaim(
        execution_arn=item["array"]["S"].removeprefix(FSR_KEY_PREFIX),
        array=item.get("arrayName", {}).get("S", ""),
        pairs=tuple(sorted(item.get("pairs", {}).get("SS", []))),
        enabled_at=enabled,
    )


def claim_fsr(table: str, array: str, execution_arn: str, pairs: list[str]) -> None:
    """Write down the FSR pairs this run is about to enable, before enabling them, so that the
    run's own failure path, the cleanup after a stop, and the sweeper know them even when EC2's
    answer was lost or the run's lock was taken over."""
    if not pairs:
        return
    clients.dynamodb().update_item(
        TableName=table,
        Key=_fsr_key(execution_arn),
        UpdateExpression=(
            "SET arrayName = :a, claimedAt = if_not_exists(claimedAt, :t) ADD pairs :p"
        ),
        ExpressionAttributeValues={
            ":a": {"S": array},
            ":t": {"N": str(int(time.time()))},
            ":p": {"SS": pairs},
        },
    )


def record_fsr_enabled(table: str, execution_arn: str, enabled_at: dict[str, str]) -> None:
    """Add the EnablingTime EC2 answered for each pair this run enabled."""
    if not enabled_at:
        return
    clients.dynamodb().update_item(
        TableName=table,
        Key=_fsr_key(execution_arn),
        UpdateExpression="ADD enabled :e",
        ExpressionAttributeValues={":e": {"SS": [f"{p}|{t}" for p, t in enabled_at.items()]}},
    )


def fsr_claim(table: str, execution_arn: str) -> FsrClaim | None:
    item = (
        clients.dynamodb()
        .get_item(TableName=table, Key=_fsr_key(execution_arn), ConsistentRead=True)
        .get("Item")
    )
    return _claim(item) if item else None


def scan_prefixed(table: str, prefix: str) -> list[dict[str, Any]]:
    """Every item whose key starts with ``prefix`` (the table holds locks, backup holds, FSR
    claims, runs' records and arrays' recorded instances, each under a prefix of its own)."""
    pages = (
        clients.dynamodb()
        .get_paginator("scan")
        .paginate(
            TableName=table,
            ConsistentRead=True,
            FilterExpression="begins_with(#k, :p)",
            ExpressionAttributeNames={"#k": "array"},
            ExpressionAttributeValues={":p": {"S": prefix}},
        )
    )
    return [item for page in pages for item in page.get("Items", [])]


def fsr_claims(table: str) -> list[FsrClaim]:
    """Every run's FSR claim (the table holds a lock per array and a claim per FSR restore)."""
    return [_claim(item) for item in scan_prefixed(table, FSR_KEY_PREFIX)]


def drop_fsr_claim(table: str, execution_arn: str) -> None:
    clients.dynamodb().delete_item(TableName=table, Key=_fsr_key(execution_arn))
