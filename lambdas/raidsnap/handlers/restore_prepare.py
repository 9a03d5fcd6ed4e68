"""Restore, step 1: validate the input, resolve set and target, check the agent, take the lock."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import RestoreSettings
from raidsnap.handlers._entry import entry
from raidsnap.observability import logger
from raidsnap.workflows import restore


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    state = restore.prepare(event, RestoreSettings.from_env())
    logger.append_keys(array=state["array"], set_id=state["setId"])
    return state
