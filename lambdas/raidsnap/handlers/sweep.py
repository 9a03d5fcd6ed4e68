"""On a schedule: remove the FSR and volumes that ended restores left behind."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import SweeperSettings
from raidsnap.handlers._entry import entry
from raidsnap.workflows import sweeper


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    s = SweeperSettings.from_env()
    return sweeper.sweep(s.lock_table, s.restore_executions, s.kept_arrays).report().dump()
