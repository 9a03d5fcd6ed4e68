"""Which sets of an array to keep, and which to delete."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from raidsnap.sets import SnapshotSet


@dataclass(frozen=True)
class RetentionPlan:
    keep: tuple[SnapshotSet, ...]
    delete: tuple[SnapshotSet, ...]
    reasons: dict[str, str]


def plan(
    sets: Sequence[SnapshotSet],
    keep_complete: int,
    protected: Collection[str],
    now: datetime,
) -> RetentionPlan:
    """Keep the newest ``keep_complete`` restorable sets (never fewer than one).

    Only sets raidsnap recorded are considered; snapshots no set recorded are never planned for
    deletion. Older restorable sets go. A set that is not restorable by itself (incomplete,
    degraded, failed, or complete without a recorded md UUID) goes once it is older than the
    oldest kept restorable set and none of its snapshots is still pending: a set newer than that
    may belong to a backup still running, or be the newest data there is (a set taken from the
    volume tags while the agent was offline); of those, only the newest ``keep_complete`` stay
    once they are not pending. So sets taken from tags alone never evict the restorable ones,
    and the newest restorable set is always kept. Sets named in ``protected`` (used by a running
    restore, or being copied elsewhere) always stay, and so does a set whose backup is still
    recording it."""
    keep_complete = max(1, keep_complete)
    ordered = sorted((s for s in sets if s.recorded), key=lambda s: (s.start_time, s.set_id))
    complete = [s for s in ordered if s.restorable]
    kept_complete = complete[-keep_complete:]
    kept_ids = {s.set_id for s in kept_complete}
    horizon = kept_complete[0].start_time if kept_complete else None
    # Sets that are not complete but may still matter (a degraded array's, newer than the kept
    # complete ones) are kept too, but only the newest keep_complete of them: a week of
    # degraded backups must not pile up forever.
    recent_incomplete = [
        s for s in ordered if not s.restorable and (horizon is None or s.start_time >= horizon)
    ]
    kept_incomplete = {s.set_id for s in recent_incomplete[-keep_complete:]}
    keep: list[SnapshotSet] = []
    delete: list[SnapshotSet] = []
    reasons: dict[str, str] = {}
    for s in ordered:
        if s.set_id in kept_ids:
            keep.append(s)
            reasons[s.set_id] = "within retention"
        elif s.set_id in protected:
            keep.append(s)
            reasons[s.set_id] = "in use by a running restore, or being copied elsewhere"
        elif s.restorable:
            delete.append(s)
            reasons[s.set_id] = f"older than the newest {keep_complete} restorable sets"
        elif s.pending or s.taking(now):
            keep.append(s)
            reasons[s.set_id] = "incomplete and still pending"
        elif s.set_id in kept_incomplete:
            keep.append(s)
            reasons[s.set_id] = f"{_not_restorable(s)}, but newer than the oldest kept set"
        elif horizon is None or s.start_time >= horizon:
            delete.append(s)
            reasons[s.set_id] = (
                f"{_not_restorable(s)}, and older than the newest {keep_complete} such sets"
            )
        else:
            delete.append(s)
            reasons[s.set_id] = f"{_not_restorable(s)} and older than every kept set"
    return RetentionPlan(keep=tuple(keep), delete=tuple(delete), reasons=reasons)


def _not_restorable(s: SnapshotSet) -> str:
    return "complete but without a recorded md UUID" if s.complete else "incomplete"
