"""The EventBridge Scheduler schedules that start one workflow for one array, as deployed.

ListSchedules gives each schedule's name, group, state and target ARN (its ScheduleSummary);
GetSchedule gives its expression and its target's Input, the execution input it starts the
workflow with (EventBridge Scheduler API reference, ListSchedules and GetSchedule)."""

from __future__ import annotations

import json
from typing import Any

import boto3


def input_of(schedule: dict[str, Any]) -> dict[str, Any]:
    """The execution input a schedule starts its workflow with ({} if it is not a JSON object)."""
    try:
        given = json.loads((schedule.get("Target") or {}).get("Input") or "{}")
    except ValueError:
        return {}
    return given if isinstance(given, dict) else {}


def of_array(state_machine_arn: str, array: str) -> list[dict[str, Any]]:
    """Every schedule (GetSchedule's answer) that starts ``state_machine_arn`` for ``array``."""
    scheduler: Any = boto3.client("scheduler")
    found = []
    for page in scheduler.get_paginator("list_schedules").paginate():
        for summary in page.get("Schedules", []):
            if (summary.get("Target") or {}).get("Arn") != state_machine_arn:
                continue
            schedule = scheduler.get_schedule(
                Name=summary["Name"], GroupName=summary.get("GroupName", "default")
            )
            if input_of(schedule).get("array") == array:
                found.append(schedule)
    return found
