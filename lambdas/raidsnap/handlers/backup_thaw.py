"""Backup: thaw the filesystem once the snapshot set's point in time is fixed."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import BackupSettings, Documents
from raidsnap.handlers._entry import entry
from raidsnap.workflows.backup import contracts, send_thaw


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    call = contracts.CommandCall.model_validate(event)
    return send_thaw(call, Documents.from_env(), BackupSettings.from_env()).dump()
