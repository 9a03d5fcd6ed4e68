"""Backup, before retention: the array's lock policy locks every snapshot of its newest
restorable sets (raidsnap.set_locks), and retention never asks to delete a set a lock holds."""

from __future__ import annotations

from raidsnap.set_locks import LockReport, held_back
from raidsnap.set_locks import lock_newest as _lock_newest
from raidsnap.workflows.backup.contracts import RetentionCall

__all__ = ["held_back", "lock_newest"]


def lock_newest(call: RetentionCall) -> LockReport | None:
    """The backup's lock step: a lock that fails leaves the set taken and recorded, and
    retention not run."""
    return _lock_newest(
        call.plan.array,
        "the set is taken and recorded, and retention did not run. The next backup tries again",
    )
