"""Restore, last step: release the lock and shape the output."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import RestoreSettings
from raidsnap.handlers._entry import entry
from raidsnap.observability import metrics
from raidsnap.workflows import restore


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    state = restore.finish(event, RestoreSettings.from_env())
    metrics.add_dimension(name="Array", value=state["array"])
    metrics.add_metric(name="RestoreSucceeded", unit="Count", value=1)
    return state
