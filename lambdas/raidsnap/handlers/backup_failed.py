"""Backup failure path: thaw if frozen, and name the error for the run's Fail state."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import BackupSettings, Documents
from raidsnap.handlers._entry import entry
from raidsnap.workflows.backup import contracts, explain_failure


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    call = contracts.FailureCall.model_validate(event)
    return explain_failure(call, Documents.from_env(), BackupSettings.from_env()).dump()
