"""The fastRestore policy's claim, one item per array in the lock table, and what restores and
the sweeper ask of it: which FSR pairs the policy keeps on, which they must never disable.

The item is keyed "keepfsr#<array>" (array names never contain "#"), carries no expiry (the
policy's FSR lasts from backup to backup, for as long as the policy is configured), holds the
sets as one JSON document, and is written with a version condition: two backups of an array
that change it at once each apply their change to the other's (DynamoDB developer guide,
"Condition expressions": a PutItem whose condition fails changes nothing).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from botocore.exceptions import ClientError

from raidsnap import clients
from raidsnap.aws import error_code, fsr, lock
from raidsnap.errors import ThrottledError
from raidsnap.plan.fsr import pair_key
from raidsnap.plan.kept_fsr import Claim, KeptSet, without

KEY_PREFIX = "keepfsr#"
# Tries of a versioned write against other runs writing the same claim; then the step is
# retried later by the workflow (ThrottledError has the long backoff).
ATTEMPTS = 5


def _key(array: str) -> dict[str, Any]:
    return {"array": {"S": KEY_PREFIX + array}}


def _claim(item: dict[str, Any]) -> Claim:
    raw = json.loads(item.get("sets", {}).get("S", "[]"))
    return Claim(
        array=item["array"]["S"].removeprefix(KEY_PREFIX),
        version=int(item.get("version", {}).get("N", "0")),
        sets=tuple(KeptSet.from_json(s) for s in raw),
    )


def read(table: str, array: str) -> Claim:
    item = (
        clients.dynamodb()
        .get_item(TableName=table, Key=_key(array), ConsistentRead=True)
        .get("Item")
    )
    return _claim(item) if item else Claim(array)


def claims(table: str) -> list[Claim]:
    """Every array's claim."""
    return [_claim(item) for item in lock.scan_prefixed(table, KEY_PREFIX)]


def _write(table: str, current: Claim, sets: list[KeptSet]) -> bool:
    """Replace the claim if nobody changed it since ``current`` was read; False if someone did.
    A claim left with no set goes."""
    ddb = clients.dynamodb()
    condition: dict[str, Any] = {
        "ConditionExpression": "attribute_not_exists(#a)",
        "ExpressionAttributeNames": {"#a": "array"},
    }
    if current.version:
        condition = {
            "ConditionExpression": "version = :v",
            "ExpressionAttributeValues": {":v": {"N": str(current.version)}},
        }
    try:
        if not sets:
            if current.version:
                ddb.delete_item(TableName=table, Key=_key(current.array), **condition)
            return True
        item = {
            **_key(current.array),
            "arrayName": {"S": current.array},
            "version": {"N": str(current.version + 1)},
            "sets": {"S": json.dumps([s.to_json() for s in sets], sort_keys=True)},
        }
        ddb.put_item(TableName=table, Item=item, **condition)
    except ClientError as err:
        if error_code(err) == "ConditionalCheckFailedException":
            return False
        raise
    return True


def change(table: str, array: str, mutate: Callable[[list[KeptSet]], list[KeptSet]]) -> Claim:
    """Apply ``mutate`` to the claim's sets as they are now, and write the result."""
    for _ in range(ATTEMPTS):
        current = read(table, array)
        sets = mutate(list(current.sets))
        if _write(table, current, sets):
            return Claim(array, current.version + 1 if sets else 0, tuple(sets))
    raise ThrottledError(
        f"the fastRestore claim of {array} kept changing under this run ({ATTEMPTS} tries)"
    )


def kept_pairs(table: str, array: str) -> set[str]:
    """The pairs (snapshot@zone) the array's policy keeps on, or is enabling."""
    return read(table, array).pairs


def disable_unkept(table: str, array: str, snapshot_ids: Iterable[str], zone: str) -> list[str]:
    """Disable FSR for these snapshots in the zone, except the pairs the array's fastRestore
    policy keeps: a restore (or its cleanup) that enabled a pair the policy took over since
    leaves it on. Returns the snapshots left on."""
    ids = sorted(set(snapshot_ids))
    if not ids:
        return []
    kept = kept_pairs(table, array)
    left = [sid for sid in ids if pair_key(sid, zone) in kept]
    off = [sid for sid in ids if sid not in left]
    if off:
        fsr.disable(off, zone)
    return left


def turn_off(
    table: str,
    array: str,
    sets: Sequence[KeptSet],
    alive: Callable[[str], bool] | None = None,
) -> tuple[list[str], list[str]]:
    """Disable the FSR of these sets of the array and take them out of its claim, except a set
    a running restore of the array holds (it may be creating volumes from it): that one keeps
    its FSR for now (``alive``: see lock.sets_held). Deleting a snapshot turns its FSR off by
    itself (EBS User Guide, "Configure fast snapshot restore": "When you delete a snapshot
    that you own, fast snapshot restore is automatically disabled"), so a set retention deleted
    has nothing on and only leaves the claim. Returns (the sets turned off, notes)."""
    held = lock.sets_held(table, array, alive)
    off: list[str] = []
    notes: list[str] = []
    for s in sets:
        if s.set_id in held:
            notes.append(f"set {s.set_id} of {array} keeps its FSR while a restore uses it")
            continue
        for zone in s.zones:
            on = fsr.already_active(sorted(s.sizes), zone)
            ours = sorted(sid for sid in on if pair_key(sid, zone) not in s.foreign)
            if ours:
                fsr.disable(ours, zone)
        off.append(s.set_id)
    if off:
        change(table, array, lambda current: without(current, off))
    return off, notes
