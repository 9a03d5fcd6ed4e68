"""Restore: create every member's volume (once, however often the step is retried)."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import RestoreSettings
from raidsnap.handlers._entry import entry
from raidsnap.workflows import restore


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    settings = RestoreSettings.from_env()
    return restore.create_volumes(restore.CreateCall.model_validate(event), settings).dump()
