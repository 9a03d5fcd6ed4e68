"""Restore, step 1: validate the input, resolve set and target, check the agent, take the lock."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import RestoreSettings
from raidsnap.handlers._entry import entry
from raidsnap.workflows import restore


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    settings = RestoreSettings.from_env()
    return restore.prepare(restore.PrepareCall.model_validate(event), settings).dump()
