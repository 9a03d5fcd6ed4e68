"""Restore, last step: release the lock and shape the output."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import RestoreSettings
from raidsnap.handlers._entry import entry
from raidsnap.workflows import restore


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    settings = RestoreSettings.from_env()
    return restore.finish(restore.StateCall.model_validate(event), settings).dump()
