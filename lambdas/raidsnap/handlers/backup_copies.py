"""Backup: hand the new set to each destination's copy workflow, then follow those runs; and
after a run stopped or timed out while following them, take back its share (a rule's event)."""

from __future__ import annotations

from typing import Any

from raidsnap.execution_events import StatusChange
from raidsnap.handlers._entry import entry
from raidsnap.workflows import backup
from raidsnap.workflows.backup.contracts import CopiesCall
from raidsnap.workflows.backup.copies_ended import after_run_ended


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    if "detail" in event:
        return after_run_ended(StatusChange.model_validate(event)).dump()
    return backup.copy_set(CopiesCall.model_validate(event)).dump()
