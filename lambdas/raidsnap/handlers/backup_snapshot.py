"""Backup: take the multi-volume snapshot set (once, however often the step is retried)."""

from __future__ import annotations

from typing import Any

from raidsnap.handlers._entry import entry
from raidsnap.observability import metrics
from raidsnap.workflows import backup


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    state = backup.create_set(event)
    metrics.add_dimension(name="Array", value=state["array"])
    metrics.add_metric(name="SnapshotSetsStarted", unit="Count", value=1)
    return state
