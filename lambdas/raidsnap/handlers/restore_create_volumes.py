"""Restore: create every member's volume (once, however often the step is retried)."""

from __future__ import annotations

from typing import Any

from raidsnap.handlers._entry import entry
from raidsnap.observability import metrics
from raidsnap.workflows import restore


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    state = restore.create_volumes(event)
    metrics.add_dimension(name="Array", value=state["array"])
    metrics.add_metric(name="VolumesCreated", unit="Count", value=len(state["volumes"]["ids"]))
    return state
