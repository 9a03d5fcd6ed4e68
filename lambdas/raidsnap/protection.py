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
import os
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from raidsnap import clients
from raidsnap.observability import logger

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


def alarms_by_array() -> dict[str, str]:
    """ALARM_BY_ARRAY: each array with recovery configured -> its attached-EBS alarm's name."""
    raw = os.environ.get("ALARM_BY_ARRAY", "").strip() or "{}"
    mapping = json.loads(raw)
    return {str(k): str(v) for k, v in mapping.items()} if isinstance(mapping, dict) else {}


def follow(array: str, instance_id: str) -> Protection:
    """Point the array's alarm at the instance that now holds the array (if it watches another).
    Never raises for AWS's answer: the array is restored by now, and a recovery that failed here
    would give the array's tag back to the instance it left."""
    alarm = alarms_by_array().get(array)
    if not alarm or not instance_id:
        return Protection(array, instance_id, None, moved=False)
    cloudwatch = clients.cloudwatch()
    previous: str | None = None
    try:
        found = cloudwatch.describe_alarms(AlarmNames=[alarm], AlarmTypes=["MetricAlarm"])
        current: dict[str, Any] = dict((found.get("MetricAlarms") or [{}])[0])
        if not current:
            logger.warning("the array's alarm is gone", extra={"array": array, "alarm": alarm})
            return Protection(array, instance_id, None, moved=False)
        dims = [dict(d) for d in current.get("Dimensions") or []]
        previous = next((str(d["Value"]) for d in dims if d.get("Name") == "InstanceId"), None)
        if previous == instance_id:
            return Protection(array, instance_id, alarm, moved=False, previous=previous)
        fields = {k: current[k] for k in _CARRIED if current.get(k) is not None}
        if previous and "AlarmDescription" in fields:
            fields["AlarmDescription"] = str(fields["AlarmDescription"]).replace(
                previous, instance_id
            )
        others = [d for d in dims if d.get("Name") != "InstanceId"]
        cloudwatch.put_metric_alarm(
            AlarmName=alarm,
            Dimensions=[*others, {"Name": "InstanceId", "Value": instance_id}],  # type: ignore[list-item]
            **fields,
        )
    except ClientError as err:
        logger.exception("the alarm could not follow the array", extra={"alarm": alarm})
        return Protection(
            array,
            instance_id,
            alarm,
            moved=False,
            previous=previous or "the instance it watched",
            problem=str(err),
        )
    logger.info(
        "alarm follows the array",
        extra={"array": array, "alarm": alarm, "from": previous, "to": instance_id},
    )
    return Protection(array, instance_id, alarm, moved=True, previous=previous)
