"""Backup: hand a set to its copies and follow them; or a run's early end (a rule)."""

from __future__ import annotations

from raidsnap.execution_events import StatusChange
from raidsnap.handlers._entry import entry
from raidsnap.workflows.backup import contracts, copies, copies_ended


@entry
def handler(event: dict[str, object]) -> dict[str, object]:
    if "detail" in event:
        return copies_ended.after_run_ended(StatusChange.model_validate(event)).dump()
    return copies.copy_set(contracts.CopiesCall.model_validate(event)).dump()
