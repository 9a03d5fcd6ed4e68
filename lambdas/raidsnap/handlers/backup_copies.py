"""Backup: hand the new set to each destination's copy workflow, then follow those runs."""

from __future__ import annotations

from typing import Any

from raidsnap.handlers._entry import entry
from raidsnap.workflows import backup
from raidsnap.workflows.backup.contracts import CopiesCall


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return backup.copy_set(CopiesCall.model_validate(event)).dump()
