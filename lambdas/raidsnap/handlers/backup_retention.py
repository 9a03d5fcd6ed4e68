"""Backup, last step: keep the newest complete sets, delete the rest, shape the output."""

from __future__ import annotations

from typing import Any

from raidsnap import backup
from raidsnap.handlers._entry import entry
from raidsnap.observability import metrics


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    state = backup.apply_retention(event)
    metrics.add_dimension(name="Array", value=state["array"])
    metrics.add_metric(name="BackupSucceeded", unit="Count", value=1)
    metrics.add_metric(
        name="SnapshotsDeleted",
        unit="Count",
        value=state["output"]["retention"]["deletedSnapshots"],
    )
    return state
