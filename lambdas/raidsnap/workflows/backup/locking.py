"""Backup, before retention: the array's lock policy (arrays.<name>.lock) locks every snapshot
of its newest restorable sets; and retention's view of locks: a set whose snapshots a lock
holds is never asked to be deleted, it is reported as held."""

from __future__ import annotations

from botocore.exceptions import ClientError

from raidsnap.aws import THROTTLE_CODES, error_code, snapshot_locks, snapshot_sets
from raidsnap.environment import lock_policy
from raidsnap.errors import SnapshotLockFailedError
from raidsnap.observability import count, logger
from raidsnap.sets import SnapshotSet, order
from raidsnap.workflows.backup.contracts import HeldSet, LockReport, RetentionCall


def lock_newest(call: RetentionCall) -> LockReport | None:
    """Lock the snapshots of the newest restorable sets that no lock holds now (a set among
    them whose lock expired is locked again); None when the array has no lock policy."""
    array = call.plan.array
    policy = lock_policy(array)
    if policy is None:
        return None
    ordered = sorted(snapshot_sets.list_sets(array), key=order)
    newest = [s for s in ordered if s.restorable][-policy.sets :]
    ids = [m.snapshot_id for s in newest for m in s.by_index()]
    held = snapshot_locks.holding(ids)
    locked: list[str] = []
    for snapshot_id in ids:
        if snapshot_id in held:
            continue
        try:
            snapshot_locks.lock(snapshot_id, policy)
        except ClientError as err:
            if error_code(err) in THROTTLE_CODES:
                raise
            raise SnapshotLockFailedError(
                f"the lock policy of {array} ({policy.mode}, {policy.days} days) could not lock "
                f"snapshot {snapshot_id}: {error_code(err)}: "
                f"{err.response.get('Error', {}).get('Message', '')}. The set is taken and "
                f"recorded; {len(locked)} snapshots were locked before this one, and retention "
                "did not run. The next backup tries again"
            ) from None
        locked.append(snapshot_id)
    count("SnapshotsLocked", len(locked))
    return LockReport(
        mode=policy.mode,
        days=policy.days,
        sets=[s.set_id for s in newest],
        lockedSnapshots=locked,
        alreadyLocked=len(held),
    )


def held_back(
    delete: tuple[SnapshotSet, ...],
) -> tuple[list[SnapshotSet], list[HeldSet]]:
    """Of the sets retention would delete, those it may ask EC2 to delete, and those a lock
    holds (any of their snapshots): kept whole, reported with the lock's state and end."""
    locks = snapshot_locks.holding(m.snapshot_id for s in delete for m in s.members)
    deletable: list[SnapshotSet] = []
    held: list[HeldSet] = []
    for s in delete:
        mine = [locks[m.snapshot_id] for m in s.members if m.snapshot_id in locks]
        if not mine:
            deletable.append(s)
            continue
        ends = [lock.expires for lock in mine if lock.expires is not None]
        until = max(ends).isoformat() if ends else None
        states = sorted({lock.state for lock in mine})
        held.append(
            HeldSet(
                setId=s.set_id,
                snapshotIds=sorted(lock.snapshot_id for lock in mine),
                lockStates=states,
                until=until,
            )
        )
        logger.info("retention keeps a locked set", extra={"set_id": s.set_id, "until": until})
    return deletable, held
