"""How old is each array's newest complete snapshot set? The answer an RPO alarm watches."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from raidsnap.snapshot_sets import SnapshotSet, list_all_sets


@dataclass(frozen=True)
class ArrayAge:
    array: str
    newest_complete: SnapshotSet | None
    age_minutes: float | None
    sets: int


def ages(now: datetime, expected: list[str]) -> list[ArrayAge]:
    """One entry per array that has sets, and per expected (configured) array even without any:
    an array whose backups never completed is the one an operator most needs to hear about."""
    found = list_all_sets()
    out = []
    for array in sorted(set(found) | set(expected)):
        sets = found.get(array, [])
        complete = [s for s in sets if s.complete]
        newest = max(complete, key=lambda s: s.start_time) if complete else None
        age = (now - newest.start_time).total_seconds() / 60 if newest else None
        out.append(ArrayAge(array, newest, age, len(sets)))
    return out
