"""The set a recovery restores, and what its age means for the user's data."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class SetFacts:
    set_id: str
    taken_at: datetime
    age_minutes: float

    @classmethod
    def at(cls, set_id: str, taken_at: datetime, reference: datetime) -> SetFacts:
        """The set as seen at ``reference`` (an age is never negative)."""
        return cls(set_id, taken_at, max(0.0, (reference - taken_at).total_seconds() / 60))

    def as_dict(self) -> dict[str, Any]:
        return {
            "setId": self.set_id,
            "takenAt": iso(self.taken_at),
            "ageMinutes": round(self.age_minutes, 1),
        }

    def sentence(self, array: str) -> str:
        return (
            f"the newest complete set of {array} is {self.set_id}, taken {iso(self.taken_at)} "
            f"({age_text(self.age_minutes)} old); writes made after that time to {array} are not "
            "in it"
        )


def iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def age_text(minutes: float) -> str:
    if minutes < 90:
        return f"{round(minutes)} min"
    if minutes < 48 * 60:
        return f"{round(minutes / 60)} h"
    return f"{round(minutes / 1440)} days"
