"""Backup, last step: keep the newest complete sets, delete the rest, shape the output; a
degraded array's run then fails with ArrayDegraded."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric

from raidsnap.handlers._entry import entry
from raidsnap.observability import metrics
from raidsnap.workflows import backup


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    state = backup.apply_retention(event)
    retention = state["output"]["retention"]
    metrics.add_dimension(name="Array", value=state["array"])
    metrics.add_metric(name="SnapshotsDeleted", unit="Count", value=retention["deletedSnapshots"])
    # Without the array dimension: one alarm watches every array (the output names the array).
    with single_metric(
        name="SnapshotsNotDeleted", unit=MetricUnit.Count, value=len(retention["notDeleted"])
    ):
        pass
    if state.get("degraded"):
        metrics.add_metric(name="DegradedSetsTaken", unit="Count", value=1)
    else:
        metrics.add_metric(name="BackupSucceeded", unit="Count", value=1)
    backup.fail_if_degraded(state)
    return state
