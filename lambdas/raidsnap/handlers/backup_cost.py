"""Backup: what an ended run cost, published for its array (a rule on the run's end)."""

from __future__ import annotations

from raidsnap.execution_events import StatusChange
from raidsnap.handlers._entry import entry
from raidsnap.workflows.backup.ended import cost_of_ended


@entry
def handler(event: dict[str, object]) -> dict[str, object]:
    return cost_of_ended(StatusChange.model_validate(event)).dump()
