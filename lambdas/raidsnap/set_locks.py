"""An array's lock policy (arrays.<name>.lock) at work wherever its sets are kept: the backup
locks the newest restorable sets it took, the copy workflow of another Region or account the
newest copied sets there (with that stack's own policy for the array, and its own grant). And
retention's view of locks: a set whose snapshots a lock holds is never asked to be deleted, it
is reported as held."""

from __future__ import annotations

from collections.abc import Iterable

from botocore.exceptions import ClientError

from raidsnap.aws import THROTTLE_CODES, error_code, snapshot_locks, snapshot_sets
from raidsnap.errors import SnapshotLockFailedError
from raidsnap.lock_settings import lock_policy
from raidsnap.models import Contract
from raidsnap.observability import count, logger
from raidsnap.sets import SnapshotSet, order


class HeldSet(Contract):
    """A set retention would delete, kept whole because a snapshot lock holds its snapshots
    (``until``: when the last of those locks ends)."""

    setId: str
    snapshotIds: list[str]
    lockStates: list[str]
    until: str | None = None


class LockReport(Contract):
    """What the array's lock policy did (the output's ``locks``): the sets it covers now, the
    snapshots this run locked, and how many were locked already."""

    mode: str
    days: int
    sets: list[str]
    lockedSnapshots: list[str]
    alreadyLocked: int


def lock_newest(array: str, after: str, origin: str = "") -> LockReport | None:
    """Lock the snapshots of the array's newest restorable sets here that no lock holds now (a
    set among them whose lock expired is locked again); None when the array has no lock policy.
    ``after`` says, in a failure's cause, what the run did not do because of it."""
    policy = lock_policy(array)
    if policy is None:
        return None
    # The newest sets of one origin: those taken here, or the copies from one source.
    ordered = sorted((s for s in snapshot_sets.list_sets(array) if s.origin == origin), key=order)
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
                f"{err.response.get('Error', {}).get('Message', '')}. {len(locked)} snapshots "
                f"were locked before this one; {after}"
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


def held_back(delete: Iterable[SnapshotSet]) -> tuple[list[SnapshotSet], list[HeldSet]]:
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
