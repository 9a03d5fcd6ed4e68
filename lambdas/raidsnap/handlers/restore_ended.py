"""A restore ended: tell the workflow still waiting on it, if one does."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import RestoreSettings
from raidsnap.handlers._entry import entry
from raidsnap.workflows.restore import ended


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    table = RestoreSettings.from_env().lock_table
    return ended.tell_parent(ended.StatusChange.model_validate(event), table).dump()
