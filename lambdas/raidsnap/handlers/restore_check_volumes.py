"""Restore: one look at all new volumes; disable this run's FSR once they exist."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import RestoreSettings
from raidsnap.handlers._entry import entry
from raidsnap.workflows import restore


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    call = restore.CheckCall.model_validate(event)
    return restore.check_volumes(call, RestoreSettings.from_env()).dump()
