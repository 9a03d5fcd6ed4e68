"""Drill, last step: the DrillSucceeded or DrillFailed metric and a notification."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import topic_arn
from raidsnap.handlers._entry import entry
from raidsnap.workflows.drill.contracts import ReportCall
from raidsnap.workflows.drill.report import report


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return report(ReportCall.model_validate(event).state, topic_arn()).dump()
