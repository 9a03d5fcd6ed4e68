"""Restore failure path: remove what this run created, disable its FSR, release its lock, and
name the error for the run's Fail state."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import RestoreDocuments, RestoreSettings
from raidsnap.handlers._entry import entry
from raidsnap.observability import metrics
from raidsnap.workflows import restore


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    result = restore.cleanup(event, RestoreSettings.from_env(), RestoreDocuments.from_env())
    if result["status"] == "done":
        if event.get("array"):
            metrics.add_dimension(name="Array", value=str(event["array"]))
        metrics.add_metric(name="RestoreFailed", unit="Count", value=1)
    return result
