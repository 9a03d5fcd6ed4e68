"""Backup: take the multi-volume snapshot set (once, however often the step is retried)."""

from __future__ import annotations

from typing import Any

from raidsnap.handlers._entry import entry
from raidsnap.workflows import backup


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return backup.create_set(event)
