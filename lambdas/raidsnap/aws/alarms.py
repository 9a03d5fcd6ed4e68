"""CloudWatch metric alarms: read one as it stands, write it back whole."""

from __future__ import annotations

from typing import Any

from raidsnap import clients


def describe(alarm: str) -> dict[str, Any] | None:
    """The metric alarm of that name as DescribeAlarms answers it (None: there is none)."""
    found = clients.cloudwatch().describe_alarms(AlarmNames=[alarm], AlarmTypes=["MetricAlarm"])
    current = found.get("MetricAlarms") or []
    return dict(current[0]) if current else None


def put(alarm: str, configuration: dict[str, Any]) -> None:
    """PutMetricAlarm with the whole configuration (it overwrites every field of an existing
    alarm and keeps its state: PutMetricAlarm, CloudWatch API Reference)."""
    clients.cloudwatch().put_metric_alarm(AlarmName=alarm, **configuration)
