"""Backup, step 1: validate the input, find the instance, start discovery."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import BackupSettings, Documents
from raidsnap.handlers._entry import entry
from raidsnap.workflows import backup


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return backup.prepare(event, Documents.from_env(), BackupSettings.from_env())
