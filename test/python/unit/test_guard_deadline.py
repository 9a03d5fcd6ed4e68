"""When a backup takes the freeze guard to thaw: MaxFreezeSeconds after fsfreeze -f (after the
pre hook), as the freeze reports it, within what AWS's own clock allows."""

from __future__ import annotations

from typing import Any

import pytest

from raidsnap.workflows.backup.contracts import Command
from raidsnap.workflows.backup.snapshot import guard_deadline
from raidsnap.workflows.backup.times import iso, parse_time

REQUESTED = "2026-01-01T10:00:00Z"
FLOOR = "2026-01-01T10:01:00Z"  # requested + MaxFreezeSeconds (60)
CEILING = "2026-01-01T10:04:00Z"  # requested + the command's time limit (120) + 60


def freeze(**result: Any) -> Command:
    return Command(
        status="success",
        requestedAt=REQUESTED,
        frozenUntil=FLOOR,
        frozenAtMostUntil=CEILING,
        result=result or None,
    )


@pytest.mark.parametrize(
    ("reported", "taken"),
    [
        # a pre hook of 90 s: the guard counts from the freeze after it
        ("2026-01-01T10:02:30Z", "2026-01-01T10:02:30Z"),
        # an instance clock behind AWS's: never before the request's own bound
        ("2026-01-01T09:59:00Z", FLOOR),
        # an instance clock far ahead: never after the command's time limit plus the bound
        ("2026-01-01T11:00:00Z", CEILING),
        ("not a time", FLOOR),
    ],
)
def test_the_guard_deadline_is_the_reported_one_within_aws_bounds(
    reported: str, taken: str
) -> None:
    assert guard_deadline(freeze(thawDeadline=reported)) == parse_time(taken)


def test_without_a_report_the_deadline_is_the_request_plus_the_bound() -> None:
    assert iso(guard_deadline(freeze()) or parse_time(REQUESTED)) == "2026-01-01T10:01:00Z"
    assert guard_deadline(Command(status="success")) is None
