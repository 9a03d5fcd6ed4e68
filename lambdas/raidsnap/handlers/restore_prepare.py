"""Restore, step 1: validate the input, resolve set and target, check the agent, take the lock."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import RestoreSettings
from raidsnap.handlers._entry import entry
from raidsnap.workflows import restore


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return restore.prepare(event, RestoreSettings.from_env())
