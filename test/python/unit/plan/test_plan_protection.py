"""What is written to the array's alarm when the array moves, and what the operators read
(plan.protection). PutMetricAlarm overwrites an existing alarm's whole configuration
(PutMetricAlarm, CloudWatch API Reference), so every field is carried."""

from __future__ import annotations

from typing import Any

from raidsnap.plan.protection import Protection, alarms_by_array, repointed, watched

ALARM: dict[str, Any] = {
    "AlarmName": "db1-attached-ebs",
    "AlarmArn": "arn:aws:cloudwatch:us-east-1:123456789012:alarm:db1-attached-ebs",
    "AlarmDescription": "raidsnap: attached EBS of i-old failed",
    "ActionsEnabled": True,
    "AlarmActions": ["arn:aws:sns:us-east-1:123456789012:t"],
    "OKActions": [],
    "MetricName": "StatusCheckFailed_AttachedEBS",
    "Namespace": "AWS/EC2",
    "Statistic": "Maximum",
    "Period": 60,
    "EvaluationPeriods": 10,
    "DatapointsToAlarm": 10,
    "Threshold": 1.0,
    "ComparisonOperator": "GreaterThanOrEqualToThreshold",
    "TreatMissingData": "missing",
    "StateValue": "ALARM",
    "Dimensions": [{"Name": "InstanceId", "Value": "i-old"}, {"Name": "Extra", "Value": "x"}],
}


def test_the_alarm_is_written_back_whole_with_only_the_instance_changed() -> None:
    put = repointed(ALARM, "i-new")
    assert put["Dimensions"] == [
        {"Name": "Extra", "Value": "x"},
        {"Name": "InstanceId", "Value": "i-new"},
    ]
    assert put["AlarmDescription"] == "raidsnap: attached EBS of i-new failed"
    for field in ("AlarmActions", "OKActions", "Threshold", "DatapointsToAlarm", "Period"):
        assert put[field] == ALARM[field]
    # What DescribeAlarms answers but PutMetricAlarm does not take stays out.
    assert not {"AlarmName", "AlarmArn", "StateValue"} & set(put)


def test_an_alarm_watching_no_instance_gains_one_and_keeps_its_description() -> None:
    bare = {"AlarmDescription": "watch", "Dimensions": []}
    assert watched(bare) is None
    assert repointed(bare, "i-new") == {
        "AlarmDescription": "watch",
        "Dimensions": [{"Name": "InstanceId", "Value": "i-new"}],
    }
    assert watched(ALARM) == "i-old"


def test_alarm_by_array_reads_a_mapping_and_nothing_else() -> None:
    assert alarms_by_array('{"db1": "a1"}') == {"db1": "a1"}
    assert alarms_by_array("") == {}
    assert alarms_by_array("[1]") == {}


def test_what_the_operators_read_of_each_outcome() -> None:
    moved = Protection("db1", "i-new", "a1", moved=True, previous="i-old")
    assert "now watches i-new (it watched i-old)" in moved.sentence()
    assert "Set recovery.instanceId of db1 to i-new" in moved.sentence()
    assert moved.as_dict()["alarmMoved"] is True
    same = Protection("db1", "i-old", "a1", moved=False, previous="i-old")
    assert same.sentence() == "the attached-EBS alarm a1 watches i-old, as before"
    none = Protection("db1", "i-new", None, moved=False)
    assert "no attached-EBS alarm" in none.sentence()
    failed = Protection("db1", "i-new", "a1", moved=False, previous="i-old", problem="denied")
    assert "still watches i-old: pointing it at i-new failed (denied)" in failed.sentence()
    assert failed.as_dict()["problem"] == "denied"
