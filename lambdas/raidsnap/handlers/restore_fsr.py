"""Restore: enable Fast Snapshot Restore for the set in the target's AZ, then follow it."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import RestoreSettings
from raidsnap.handlers._entry import entry
from raidsnap.workflows import restore


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    settings = RestoreSettings.from_env()
    return restore.fsr_step(restore.FsrCall.model_validate(event), settings).dump()
