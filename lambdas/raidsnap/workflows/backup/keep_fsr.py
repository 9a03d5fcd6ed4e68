"""Backup, after retention: the array's fastRestore policy. Keep Fast Snapshot Restore enabled
on the newest complete sets in the configured Availability Zones, so that a restore there finds
it ready at its first look.

The new set's FSR is claimed (raidsnap.aws.kept_fsr), then enabled in each zone, then followed
until every pair is enabled and holds a volume creation credit; only then does the set that
falls out of the newest ``sets`` go off. When the Region's quota has no room for the new set,
nothing is enabled for it and the previous sets keep their FSR: the output warns, and the
metric FastRestoreNotKept raises its alarm.
"""

from __future__ import annotations

from botocore.exceptions import ClientError

from raidsnap.aws import THROTTLE_CODES, error_code, fsr, kept_fsr, lock, snapshot_sets
from raidsnap.environment import (
    FastRestorePolicy,
    fast_restore_by_array,
    region,
    restore_lock_table,
)
from raidsnap.errors import ConfigurationError
from raidsnap.observability import logger, publish_alone
from raidsnap.plan import fsr as plan_fsr
from raidsnap.plan import kept_fsr as plan
from raidsnap.workflows.backup.contracts import (
    FastRestoreReport,
    KeepFsr,
    KeepFsrCall,
    KeptSnapshot,
)
from raidsnap.workflows.backup.keep_fsr_retire import retire, retire_all

NOT_KEPT_METRIC = "FastRestoreNotKept"


def keep_fsr(call: KeepFsrCall) -> KeepFsr:
    """First call (no result yet): enable FSR for the new set. Later calls: look, and once the
    new set is ready, disable the sets it replaced."""
    array = call.plan.array
    policy = fast_restore_by_array().get(array)
    table = restore_lock_table()
    if table is None:
        if policy is None:
            return KeepFsr(status="off")
        raise ConfigurationError("RESTORE_LOCK_TABLE is not set: the policy keeps its claim there")
    try:
        if call.keep is None:
            result = _start(call, policy, table)
        else:
            result = _look(call, call.keep, policy, table)
    except ClientError as err:
        if error_code(err) in THROTTLE_CODES:
            raise
        message = err.response.get("Error", {}).get("Message", "")
        result = _give_up(
            call, call.keep or _new(call, policy), table, f"{error_code(err)}: {message}"
        )
    _publish(result)
    return result


def _new(call: KeepFsrCall, policy: FastRestorePolicy | None) -> KeepFsr:
    out = call.retention.output
    return KeepFsr(
        status="pending",
        setId=out.setId,
        zones=list(policy.zones) if policy else [],
        limitSeconds=plan.wait_limit(call.snapshots.waitedSeconds),
    )


def _start(call: KeepFsrCall, policy: FastRestorePolicy | None, table: str) -> KeepFsr:
    array, out = call.plan.array, call.retention.output
    if policy is None:
        return retire_all(array, table)
    k = _new(call, policy)
    foreign = [z for z in policy.zones if z[:-1] != region()]
    if foreign:
        return _skipped(k, f"zones {foreign} are not in this Region ({region()})", table, array)
    if not out.snapshotIds:
        return _skipped(k, f"set {out.setId} is not complete", table, array)
    newer = [
        c.set_id
        for c in kept_fsr.read(table, array).sets
        if c.state == plan.KEPT and c.taken_at > call.plan.execution.startTime
    ]
    if newer:
        # A later backup's set already keeps FSR: this older one would only be turned off again.
        return _superseded(k, newer)
    sizes = {
        str(s["SnapshotId"]): int(s.get("VolumeSize", 0))
        for s in snapshot_sets.by_ids(out.snapshotIds)
    }
    k.snapshots = [
        KeptSnapshot(snapshotId=sid, sizeGib=sizes.get(sid, 0)) for sid in out.snapshotIds
    ]
    limit = fsr.region_limit()
    if limit.assumed_because is not None:
        k.notes.append(
            f"Service Quotas did not give the Region's FSR quota ({limit.assumed_because}); "
            f"the default of {limit.snapshots} snapshots was assumed"
        )
    problem = plan_fsr.quota_problem(out.snapshotIds, limit, fsr.active_in_region())
    if problem is not None:
        return _skipped(k, problem, table, array)
    before = sorted(
        plan_fsr.pair_key(sid, zone)
        for zone in policy.zones
        for sid in fsr.already_active(out.snapshotIds, zone)
    )
    restored = {pair for c in lock.fsr_claims(table) for pair in c.pairs}
    entry = plan.KeptSet(
        set_id=out.setId,
        taken_at=call.plan.execution.startTime,
        zones=tuple(policy.zones),
        sizes=sizes,
        run=call.plan.execution.arn,
        before=tuple(before),
        foreign=tuple(pair for pair in before if pair not in restored),
    )
    claimed = kept_fsr.change(table, array, lambda sets: plan.with_set(sets, entry)).find(out.setId)
    k.before = list(claimed.before if claimed else before)
    refused: list[str] = []
    for zone in policy.zones:
        # Pairs on already (a restore of this set enabled them) are taken over as they are.
        off = [sid for sid in out.snapshotIds if plan_fsr.pair_key(sid, zone) not in k.before]
        refused += fsr.enable(off, zone).problems
    if refused:
        return _give_up(call, k, table, "EC2 refused to enable FSR: " + "; ".join(refused))
    k.waitSeconds = plan.next_wait(_left(k, {}), 0, k.limitSeconds)
    return k


def _entry_of(k: KeepFsr) -> plan.KeptSet:
    return plan.KeptSet(
        set_id=str(k.setId),
        taken_at="",
        zones=tuple(k.zones),
        sizes={s.snapshotId: s.sizeGib for s in k.snapshots},
    )


def _left(k: KeepFsr, current: dict[str, str]) -> float:
    return plan.wait_left(_entry_of(k), current, k.seen, k.waitedSeconds)


def _current(k: KeepFsr) -> dict[str, str]:
    """Each pair's FSR state now; "absent" where EC2 shows none."""
    ids = [s.snapshotId for s in k.snapshots]
    out: dict[str, str] = {}
    for zone in k.zones:
        pairs = fsr.states(ids, zone)
        for sid in ids:
            out[plan_fsr.pair_key(sid, zone)] = pairs[sid].state if sid in pairs else "absent"
    return out


def _look(
    call: KeepFsrCall, previous: KeepFsr, policy: FastRestorePolicy | None, table: str
) -> KeepFsr:
    array = call.plan.array
    k = previous.model_copy(update={"waitedSeconds": previous.waitedSeconds + previous.waitSeconds})
    claim = kept_fsr.read(table, array)
    if claim.find(str(k.setId)) is None:
        # A later backup's set was ready first, and that run turned this one's FSR off.
        return _superseded(k, [s.set_id for s in claim.sets])
    current = _current(k)
    k.seen = plan.observe(k.seen, current, k.waitedSeconds)
    stopped = sorted(p for p, st in current.items() if st in plan.OFF)
    if stopped:
        if k.reenabled >= plan.MAX_REENABLES:
            return _give_up(call, k, table, f"FSR stopped after it was enabled: {stopped}")
        k.reenabled += 1
        for zone, ids in sorted(plan_fsr.by_zone(stopped).items()):
            fsr.enable(sorted(ids), zone)
        k.notes.append(f"FSR of {stopped} was off after it was enabled: enabled again")
    left = _left(k, current)
    if not stopped and left <= 0:
        return retire(call, k, policy, table)
    if k.waitedSeconds >= k.limitSeconds:
        slow = sorted(f"{p} {st}" for p, st in current.items() if st != "enabled")
        return _give_up(
            call, k, table, f"FSR was not ready after {k.waitedSeconds} s ({', '.join(slow)})"
        )
    k.waitSeconds = plan.next_wait(left, k.waitedSeconds, k.limitSeconds)
    return k


def _superseded(k: KeepFsr, kept: list[str]) -> KeepFsr:
    k.status = "superseded"
    k.report = FastRestoreReport(
        status="superseded",
        setId=k.setId,
        zones=k.zones,
        keptSets=kept,
        notes=[*k.notes, f"a later backup's set keeps FSR: {k.setId} does not"],
    )
    return k


def _skipped(k: KeepFsr, why: str, table: str, array: str, status: str = "skipped") -> KeepFsr:
    """The new set keeps no FSR (none was enabled for it, or what was is off again): the sets
    the policy kept before keep theirs."""
    held = [s.set_id for s in kept_fsr.read(table, array).sets]
    keeps = f"sets {held} keep their FSR" if held else "no set has FSR kept"
    done = "nothing was enabled for it" if status == "skipped" else "its FSR was disabled again"
    why = why.removeprefix("FSR was not enabled: ")
    warning = f"FSR was not kept on set {k.setId}: {why}; {done}, and {keeps}"
    logger.warning("fastRestore policy kept no FSR on the new set", extra={"reason": warning})
    k.status = "skipped" if status == "skipped" else "failed"
    k.report = FastRestoreReport(
        status=k.status,
        setId=k.setId,
        zones=k.zones,
        keptSets=held,
        warning=warning,
        notes=k.notes,
    )
    return k


def _give_up(call: KeepFsrCall, k: KeepFsr, table: str, why: str) -> KeepFsr:
    """The new set's FSR goes off again (what this run turned on, not what was on before it
    claimed it) and leaves the claim; the sets kept before keep theirs."""
    array = call.plan.array
    before = set(k.before)
    ids = [s.snapshotId for s in k.snapshots]
    for zone in k.zones:
        mine = [sid for sid in ids if plan_fsr.pair_key(sid, zone) not in before]
        try:
            fsr.disable(mine, zone)
        except ClientError:
            logger.exception("the new set's FSR could not be disabled", extra={"zone": zone})
    try:
        kept_fsr.change(table, array, lambda sets: plan.without(sets, [str(k.setId)]))
    except ClientError:
        logger.exception("the new set could not leave the fastRestore claim")
    return _skipped(k, why, table, array, status="failed")


def _publish(k: KeepFsr) -> None:
    """FastRestoreNotKept: 1 when a new set did not get its FSR, 0 when it did (one alarm for
    every array; the output names the array and why)."""
    if k.status in ("pending", "off"):
        return
    value = 1 if k.status in ("skipped", "failed") else 0
    publish_alone(NOT_KEPT_METRIC, value)
