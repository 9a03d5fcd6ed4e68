"""Backup: take the multi-volume snapshot set (once, however often the step is retried)."""

from __future__ import annotations

from typing import Any

from raidsnap.handlers._entry import entry
from raidsnap.workflows import backup
from raidsnap.workflows.backup.contracts import SnapshotCall


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return backup.create_set(SnapshotCall.model_validate(event)).dump()
