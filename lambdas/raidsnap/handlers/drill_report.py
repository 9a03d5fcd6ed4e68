"""Drill, last step: the DrillSucceeded or DrillFailed metric and a notification."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import topic_arn
from raidsnap.handlers._entry import entry
from raidsnap.observability import metrics
from raidsnap.workflows import drill


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    result = drill.report(event, topic_arn())
    metrics.add_dimension(name="Array", value=result["array"])
    metrics.add_metric(
        name="DrillSucceeded" if result["passed"] else "DrillFailed", unit="Count", value=1
    )
    return result
