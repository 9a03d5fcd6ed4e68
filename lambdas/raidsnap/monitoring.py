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
COPY_AGE_METRIC = "NewestCopiedSetAgeMinutes"


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
        # The RPO of the backups here counts the sets taken here: a copy from elsewhere (whose
        # age its source reports per place, NewestCopiedSetAgeMinutes) never hides a stalled
        # backup here. An array with only copies here (where it is copied to) reports theirs.
        local = [s for s in sets if not s.origin]
        # The RPO counts sets a recovery could restore by itself (SnapshotSet.restorable).
        complete = [s for s in (local or sets) if s.restorable]
        newest = max(complete, key=lambda s: s.start_time) if complete else None
        age = (now - newest.start_time).total_seconds() / 60 if newest else None
        out.append(ArrayAge(array, newest, age, len(sets)))
    return out


def copy_ages(
    now: datetime, found: dict[str, list[SnapshotSet]], copies: dict[str, list[str]]
) -> dict[str, dict[str, tuple[str | None, float | None]]]:
    """For each array copied elsewhere, and each place it is copied to (a Region, or
    account/Region): the newest set whose copy there completed (as the backup that handed it
    over recorded), and its age. A set counts from when it was taken, as it does here."""
    out: dict[str, dict[str, tuple[str | None, float | None]]] = {}
    for array, destinations in copies.items():
        for destination in destinations:
            copied = [
                s
                for s in found.get(array, [])
                if s.manifest is not None
                and s.manifest.copies.get(destination, {}).get("status") == "copied"
            ]
            newest = max(copied, key=lambda s: s.start_time) if copied else None
            age = (now - newest.start_time).total_seconds() / 60 if newest else None
            out.setdefault(array, {})[destination] = (newest.set_id if newest else None, age)
    return out


def _publish_copies(now: datetime, copies: dict[str, list[str]]) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for array, places in copy_ages(now, list_all_sets(), copies).items():
        for destination, (set_id, age) in places.items():
            minutes = NEVER_MINUTES if age is None else round(age, 1)
            publish_alone(COPY_AGE_METRIC, minutes, {"Array": array, "Destination": destination})
            report.setdefault(array, {})[destination] = {
                "newestCopiedSet": set_id,
                "ageMinutes": minutes,
            }
            if set_id is None:
                logger.warning(
                    "no set of the array is copied there",
                    extra={"array": array, "destination": destination},
                )
    return report


def publish(
    now: datetime, expected: list[str], copies: dict[str, list[str]] | None = None
) -> dict[str, Any]:
    """Publish each array's age as the metric NewestCompleteSetAgeMinutes, and for an array
    copied elsewhere the age of its newest copied set in each place as
    NewestCopiedSetAgeMinutes (dimension Destination); what was published."""
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
    if not copies:
        return {"arrays": report}
    return {"arrays": report, "copies": _publish_copies(now, copies)}
