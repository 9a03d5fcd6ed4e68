"""Restore: tell the parent waiting on the run that the array is mounted, or the run failed."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import RestoreSettings
from raidsnap.handlers._entry import entry
from raidsnap.workflows import restore


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    table = RestoreSettings.from_env().lock_table
    return restore.report(restore.ReportCall.model_validate(event), table).dump()
