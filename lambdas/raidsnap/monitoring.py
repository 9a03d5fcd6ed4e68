"""How old is each array's newest complete snapshot set? The answer an RPO alarm watches."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from raidsnap.aws.snapshot_sets import list_all_sets
from raidsnap.observability import logger, publish_alone
from raidsnap.sets import SnapshotSet

# An array with no complete set at all is reported as this old, so its RPO alarm fires.
NEVER_MINUTES = 10 * 365 * 24 * 60


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
        # The RPO counts sets a recovery could restore by itself (SnapshotSet.restorable).
        complete = [s for s in sets if s.restorable]
        newest = max(complete, key=lambda s: s.start_time) if complete else None
        age = (now - newest.start_time).total_seconds() / 60 if newest else None
        out.append(ArrayAge(array, newest, age, len(sets)))
    return out


def publish(now: datetime, expected: list[str]) -> dict[str, Any]:
    """Publish each array's age as the metric NewestCompleteSetAgeMinutes; what was published."""
    report = {}
    for age in ages(now, expected):
        minutes = NEVER_MINUTES if age.age_minutes is None else round(age.age_minutes, 1)
        # One EMF document per array: each carries its own Array dimension.
        publish_alone("NewestCompleteSetAgeMinutes", minutes, {"Array": age.array})
        report[age.array] = {
            "newestCompleteSet": age.newest_complete.set_id if age.newest_complete else None,
            "ageMinutes": minutes,
            "sets": age.sets,
        }
        if age.newest_complete is None:
            logger.warning("array has no complete snapshot set", extra={"array": age.array})
    return {"arrays": report}
