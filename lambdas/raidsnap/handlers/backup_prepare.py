"""Backup, step 1: validate the input, find the instance, start discovery."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import BackupSettings, Documents
from raidsnap.handlers._entry import entry
from raidsnap.workflows.backup import contracts, prepare


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    call = contracts.PrepareCall.model_validate(event)
    return prepare(call, Documents.from_env(), BackupSettings.from_env()).dump()
