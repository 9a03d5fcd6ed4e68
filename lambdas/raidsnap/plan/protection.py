"""What protects an array follows it when a recovery moves it to another instance.

The array's ``StatusCheckFailed_AttachedEBS`` alarm names one instance (its ``InstanceId``
dimension). After a recovery restores the array onto another instance, the alarm is pointed at
that instance, so that its failure starts the next recovery. The termination rule matches both
configured instances; the trigger decides by the ``raidsnap:array`` tag which of them holds the
array (lib/constructs/recovery.ts).

PutMetricAlarm replaces the whole configuration of an existing alarm ("When you update an
existing alarm, its state is left unchanged, but the update completely overwrites the previous
configuration of the alarm", PutMetricAlarm, CloudWatch API Reference), so every field of the
alarm as it stands is written back, with only the instance changed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

# Fields of DescribeAlarms' MetricAlarm that PutMetricAlarm takes under the same name.
_CARRIED = (
    "AlarmDescription",
    "ActionsEnabled",
    "OKActions",
    "AlarmActions",
    "InsufficientDataActions",
    "MetricName",
    "Namespace",
    "Statistic",
    "ExtendedStatistic",
    "Period",
    "Unit",
    "EvaluationPeriods",
    "DatapointsToAlarm",
    "Threshold",
    "ComparisonOperator",
    "TreatMissingData",
    "EvaluateLowSampleCountPercentile",
)


@dataclass(frozen=True)
class Protection:
    """The array's alarm after a recovery: which instance it watches, and whether it moved."""

    array: str
    instance_id: str
    alarm: str | None
    moved: bool
    previous: str | None = None
    # Why the alarm could not be pointed at the instance (the recovery itself still succeeded).
    problem: str | None = None

    def sentence(self) -> str:
        if self.problem:
            return (
                f"the attached-EBS alarm {self.alarm} still watches {self.previous}: pointing it "
                f"at {self.instance_id} failed ({self.problem}); point it there by hand (its "
                "InstanceId dimension), or nothing starts a recovery if that instance fails"
            )
        if self.alarm is None:
            return (
                f"{self.array} has no attached-EBS alarm (no recovery configured): nothing "
                f"starts a recovery if {self.instance_id} fails"
            )
        if not self.moved:
            return f"the attached-EBS alarm {self.alarm} watches {self.instance_id}, as before"
        return (
            f"the attached-EBS alarm {self.alarm} now watches {self.instance_id} (it watched "
            f"{self.previous}), and a failure there is recovered in place; backups follow the "
            f"raidsnap:array tag. Set recovery.instanceId of {self.array} to {self.instance_id} "
            "in the config before the next deploy, and name a new replacementInstanceId: a "
            "deploy that changes the alarm points it back at the configured instance"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "instanceId": self.instance_id,
            "alarm": self.alarm,
            "alarmMoved": self.moved,
            "previousInstanceId": self.previous,
            "problem": self.problem,
            "message": self.sentence(),
        }


def alarms_by_array(raw: str) -> dict[str, str]:
    """ALARM_BY_ARRAY (JSON): each array with recovery configured -> its alarm's name."""
    mapping = json.loads(raw.strip() or "{}")
    return {str(k): str(v) for k, v in mapping.items()} if isinstance(mapping, dict) else {}


def watched(current: dict[str, Any]) -> str | None:
    """The instance an alarm watches (its InstanceId dimension)."""
    dims = current.get("Dimensions") or []
    return next((str(d["Value"]) for d in dims if d.get("Name") == "InstanceId"), None)


def repointed(current: dict[str, Any], instance_id: str) -> dict[str, Any]:
    """PutMetricAlarm's arguments (but AlarmName) that write the alarm back as it stands, with
    only the watched instance changed (and named so in the description)."""
    previous = watched(current)
    fields = {k: current[k] for k in _CARRIED if current.get(k) is not None}
    if previous and "AlarmDescription" in fields:
        fields["AlarmDescription"] = str(fields["AlarmDescription"]).replace(previous, instance_id)
    others = [dict(d) for d in current.get("Dimensions") or [] if d.get("Name") != "InstanceId"]
    return {**fields, "Dimensions": [*others, {"Name": "InstanceId", "Value": instance_id}]}
