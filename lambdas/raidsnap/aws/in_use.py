"""Sets that retention must keep whatever their age: a running restore's, and a set whose copy
to another Region or account is under way."""

from __future__ import annotations

from datetime import datetime

from raidsnap import tags
from raidsnap.aws import lock, volumes
from raidsnap.environment import restore_lock_table
from raidsnap.sets import SnapshotSet


def sets_in_use(sets: list[SnapshotSet], now: datetime) -> set[str]:
    """Sets a restore is creating volumes from right now, or holds in the restore lock, and sets
    being copied elsewhere."""
    if not sets:
        return set()
    table = restore_lock_table()
    held = lock.sets_held(table, sets[0].array) if table else set()
    owner = {m.snapshot_id: s.set_id for s in sets for m in s.members}
    restoring = volumes.sources_being_restored(tags.RESTORE_EXECUTION)
    copying = {s.set_id for s in sets if s.copying(now)}
    return held | copying | {owner[sid] for sid in restoring if sid in owner}
