"""Backup: start fsfreeze on the array's mount point (its guard thaws after a bound)."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import BackupSettings, Documents
from raidsnap.handlers._entry import entry
from raidsnap.workflows.backup import contracts, send_freeze


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    call = contracts.CommandCall.model_validate(event)
    return send_freeze(call, Documents.from_env(), BackupSettings.from_env()).dump()
