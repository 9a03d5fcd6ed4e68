"""How a recovery tells the age of the set it restores (plan.set_facts)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from raidsnap.plan.set_facts import SetFacts, age_text, iso

TAKEN = datetime(2026, 11, 1, 4, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("minutes", "text"),
    [(0, "0 min"), (89, "89 min"), (90, "2 h"), (47 * 60, "47 h"), (48 * 60, "2 days")],
)
def test_age_text_picks_the_unit_a_person_reads(minutes: float, text: str) -> None:
    assert age_text(minutes) == text


def test_a_set_seen_later_is_as_old_as_the_time_between() -> None:
    facts = SetFacts.at("db1-20261101T040000Z-ab", TAKEN, TAKEN + timedelta(minutes=150))
    assert facts.as_dict() == {
        "setId": "db1-20261101T040000Z-ab",
        "takenAt": "2026-11-01T04:00:00Z",
        "ageMinutes": 150.0,
    }
    assert facts.sentence("db1") == (
        "the newest complete set of db1 is db1-20261101T040000Z-ab, taken 2026-11-01T04:00:00Z "
        "(2 h old); writes made after that time to db1 are not in it"
    )


def test_a_set_taken_after_the_reference_is_not_negative_in_age() -> None:
    assert SetFacts.at("s", TAKEN, TAKEN - timedelta(hours=1)).age_minutes == 0.0


def test_times_are_told_in_utc() -> None:
    other_zone = TAKEN.astimezone(tz=None)
    assert iso(other_zone) == "2026-11-01T04:00:00Z"
