"""Building the EC2 side of a scenario: an instance holding an array, its boot volume, and
volumes that are not members, all made through the EC2 API as an operator would."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

import boto3

from raidsnap_emulation.host import Hosts

DEVICE_LETTERS = "fghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class ArrayFixture:
    name: str
    instance_id: str
    availability_zone: str
    member_ids: list[str]
    boot_volume_id: str
    other_volume_ids: list[str]
    md_uuid: str
    mount_point: str


# An instance type a database of this kind runs on: 312.5 MB/s of EBS bandwidth, 1,250 MB/s for
# 30 minutes (DescribeInstanceTypes).
INSTANCE_TYPE = "r6i.2xlarge"
# An older type with 56.25 MB/s of EBS bandwidth (DescribeInstanceTypes): reading a set's members
# on it takes longer than enabling FSR for them, so a restore asked for FSR takes it.
SLOW_EBS_INSTANCE_TYPE = "m4.large"


def launch_instance(
    name: str,
    availability_zone: str,
    tag_array: bool = True,
    auto_scaling_group: str = "",
    instance_type: str = INSTANCE_TYPE,
    *,
    region: str | None = None,
) -> str:
    """A running instance; ``auto_scaling_group``: launched by that group, which tags its
    instances aws:autoscaling:groupName ("Tag Auto Scaling groups and instances", Amazon EC2
    Auto Scaling User Guide). ``region``: another Region than the emulation's own."""
    ec2 = boto3.client("ec2", region_name=region)
    tags = [{"Key": "Name", "Value": name}]
    if tag_array:
        tags.append({"Key": "raidsnap:array", "Value": name})
    if auto_scaling_group:
        tags.append({"Key": "aws:autoscaling:groupName", "Value": auto_scaling_group})
    spec: Any = {"ResourceType": "instance", "Tags": tags}
    instance = ec2.run_instances(
        ImageId="ami-0abcdef1234567890",
        MinCount=1,
        MaxCount=1,
        InstanceType=instance_type,  # type: ignore[arg-type]
        Placement={"AvailabilityZone": availability_zone},
        TagSpecifications=[spec],
    )["Instances"][0]
    return str(instance["InstanceId"])


def make_array(
    hosts: Hosts,
    name: str = "db1",
    members: int = 3,
    *,
    availability_zone: str = "us-east-1a",
    size_gib: int = 32,  # the smallest gp3 volume that takes 16,000 IOPS (500 per GiB)
    iops: int = 16000,
    throughput: int = 1000,
    unrelated: int = 1,
    tag_members: bool = False,
    mount_point: str = "/data",
    fs_type: str = "xfs",
    level: str = "raid0",
    encrypted: bool = False,
    kms_key_id: str | None = None,
    md_device: str = "/dev/md0",
    instance_type: str = INSTANCE_TYPE,
) -> ArrayFixture:
    ec2 = boto3.client("ec2")
    instance_id = launch_instance(name, availability_zone, instance_type=instance_type)
    boot = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    boot_volume = boot["BlockDeviceMappings"][0]["Ebs"]["VolumeId"]
    letters = iter(DEVICE_LETTERS)
    member_ids: list[str] = []
    other_ids: list[str] = []
    for index in range(members + unrelated):
        is_member = index < members
        tags = [{"Key": "Name", "Value": f"{name}-{index}" if is_member else "scratch"}]
        if is_member and tag_members:
            tags.append({"Key": "raidsnap:array", "Value": name})
        extra: dict[str, object] = {}
        if encrypted:
            extra["Encrypted"] = True
            if kms_key_id:
                extra["KmsKeyId"] = kms_key_id
        volume_spec: Any = {"ResourceType": "volume", "Tags": tags}
        volume = ec2.create_volume(
            AvailabilityZone=availability_zone,
            Size=size_gib if is_member else 4,
            VolumeType="gp3",
            Iops=iops if is_member else 3000,
            Throughput=throughput if is_member else 125,
            TagSpecifications=[volume_spec],
            **extra,  # type: ignore[arg-type]
        )
        (member_ids if is_member else other_ids).append(volume["VolumeId"])
    # Volumes become available after the double's creation delay: attach once they are.
    hosts.double.clock.advance(hosts.double.volume_seconds + 1)
    for vid in member_ids + other_ids:
        ec2.attach_volume(VolumeId=vid, InstanceId=instance_id, Device=f"/dev/sd{next(letters)}")
    hosts.double.clock.advance(hosts.double.attach_seconds + 1)
    md_uuid = hosts.build_array(
        instance_id,
        member_ids,
        name=name,
        level=level,
        fs_type=fs_type,
        mount_point=mount_point,
        md_device=md_device,
    )
    return ArrayFixture(
        name=name,
        instance_id=instance_id,
        availability_zone=availability_zone,
        member_ids=member_ids,
        boot_volume_id=boot_volume,
        other_volume_ids=other_ids,
        md_uuid=md_uuid,
        mount_point=mount_point,
    )


def add_array(
    hosts: Hosts,
    fx: ArrayFixture,
    name: str,
    members: int = 2,
    *,
    md_device: str = "/dev/md1",
    mount_point: str = "/logs",
    size_gib: int = 8,
) -> ArrayFixture:
    """A second array on the instance of ``fx`` (such as a database's log on md1 at /logs),
    named on the instance by the per-array tag ``raidsnap:array:<name>=<its md UUID>``."""
    ec2 = boto3.client("ec2")
    ids = [
        ec2.create_volume(
            AvailabilityZone=fx.availability_zone,
            Size=size_gib,
            VolumeType="gp3",
            TagSpecifications=[
                {"ResourceType": "volume", "Tags": [{"Key": "Name", "Value": f"{name}-{i}"}]}
            ],
        )["VolumeId"]
        for i in range(members)
    ]
    hosts.double.clock.advance(hosts.double.volume_seconds + 1)
    for vid, letter in zip(ids, reversed(DEVICE_LETTERS), strict=False):
        ec2.attach_volume(VolumeId=vid, InstanceId=fx.instance_id, Device=f"/dev/sd{letter}")
    hosts.double.clock.advance(hosts.double.attach_seconds + 1)
    md_uuid = hosts.build_array(
        fx.instance_id, ids, name=name, md_device=md_device, mount_point=mount_point
    )
    ec2.create_tags(
        Resources=[fx.instance_id], Tags=[{"Key": f"raidsnap:array:{name}", "Value": md_uuid}]
    )
    return ArrayFixture(
        name=name,
        instance_id=fx.instance_id,
        availability_zone=fx.availability_zone,
        member_ids=ids,
        boot_volume_id=fx.boot_volume_id,
        other_volume_ids=[],
        md_uuid=md_uuid,
        mount_point=mount_point,
    )


def snapshots_of(array: str) -> list[dict[str, object]]:
    """Every snapshot tagged with the array, as DescribeSnapshots returns them."""
    ec2 = boto3.client("ec2")
    pages = ec2.get_paginator("describe_snapshots").paginate(
        OwnerIds=["self"], Filters=[{"Name": "tag:raidsnap:array", "Values": [array]}]
    )
    return [dict(s) for page in pages for s in page["Snapshots"]]


def tags_of(resource: dict[str, object]) -> dict[str, str]:
    raw = resource.get("Tags") or []
    return {t["Key"]: t["Value"] for t in raw}  # type: ignore[attr-defined]


def sets_of(array: str) -> dict[str, list[dict[str, object]]]:
    """Set id -> its snapshots."""
    out: dict[str, list[dict[str, object]]] = {}
    for snap in snapshots_of(array):
        out.setdefault(tags_of(snap).get("raidsnap:set-id", ""), []).append(snap)
    return out


def _table_keyed(keys: dict[str, str]) -> str:
    ddb = boto3.client("dynamodb")
    for name in ddb.list_tables()["TableNames"]:
        schema = ddb.describe_table(TableName=name)["Table"]["KeySchema"]
        if {k["AttributeName"]: k["KeyType"] for k in schema} == keys:
            return str(name)
    raise LookupError(f"the stack has no table keyed {keys}")


def sets_table() -> str:
    """The stack's table of set manifests (keyed by array and set id)."""
    return _table_keyed({"array": "HASH", "setId": "RANGE"})


def lock_table() -> str:
    """The stack's restore lock table (one item per array)."""
    return _table_keyed({"array": "HASH"})


def record_set(
    fixture: ArrayFixture,
    set_id: str,
    snapshots: dict[int, str],
    started: Any,
    execution_arn: str = "",
    *,
    degraded: bool = False,
) -> None:
    """Write the manifest an earlier backup of raidsnap wrote when it took the set."""
    boto3.client("dynamodb").put_item(
        TableName=sets_table(),
        Item={
            "array": {"S": fixture.name},
            "setId": {"S": set_id},
            "executionArn": {"S": execution_arn or f"earlier-backup-{set_id}"},
            "status": {"S": "taken"},
            "memberCount": {"N": str(len(fixture.member_ids))},
            "volumes": {"M": {str(i): {"S": v} for i, v in enumerate(fixture.member_ids)}},
            "snapshots": {"M": {str(i): {"S": s} for i, s in snapshots.items()}},
            "degraded": {"BOOL": degraded},
            "missingSlots": {"L": []},
            "consistency": {"S": "crash"},
            "started": {"S": started.isoformat()},
        },
    )


def make_old_set(
    hosts: Hosts,
    fixture: ArrayFixture,
    set_id: str,
    *,
    missing_index: int | None = None,
    failing: bool = False,
) -> list[str]:
    """A set as an earlier backup left it, taken through the EC2 API and recorded as raidsnap
    records its sets: complete, short of one member (``missing_index``: its snapshot was
    deleted after the set was recorded), or with one snapshot that ends in error
    (``failing``)."""
    ec2 = boto3.client("ec2")
    if failing:
        hosts.double.fail_snapshots(fixture.member_ids[-1])
    set_tags: Any = {
        "ResourceType": "snapshot",
        "Tags": [
            {"Key": "raidsnap:array", "Value": fixture.name},
            {"Key": "raidsnap:set-id", "Value": set_id},
            {"Key": "raidsnap:member-count", "Value": str(len(fixture.member_ids))},
            # As discovery records it: without it a set is not restorable by itself.
            {"Key": "raidsnap:md-uuid", "Value": fixture.md_uuid},
        ],
    }
    taken = ec2.create_snapshots(
        InstanceSpecification={
            "InstanceId": fixture.instance_id,
            "ExcludeBootVolume": True,
            "ExcludeDataVolumeIds": fixture.other_volume_ids,
        },
        TagSpecifications=[set_tags],
    )["Snapshots"]
    record_set(
        fixture,
        set_id,
        {fixture.member_ids.index(s["VolumeId"]): s["SnapshotId"] for s in taken},
        min(s["StartTime"] for s in taken),
    )
    ids = []
    for snap in taken:
        index = fixture.member_ids.index(snap["VolumeId"])
        if index == missing_index:
            ec2.delete_snapshot(SnapshotId=snap["SnapshotId"])
            continue
        ec2.create_tags(
            Resources=[snap["SnapshotId"]],
            Tags=[
                {"Key": "raidsnap:member-index", "Value": str(index)},
                {"Key": "raidsnap:source-volume", "Value": snap["VolumeId"]},
            ],
        )
        ids.append(snap["SnapshotId"])
    # Let these snapshots finish (or fail), and keep the per-volume snapshot rate.
    hosts.double.clock.advance(hosts.double.snapshot_seconds + 20)
    if failing:
        hosts.double.heal_snapshots(fixture.member_ids[-1])
    return ids


def backed_up(hosts: Hosts, emu_run: Any, fixture: ArrayFixture) -> str:
    """Take a set of the array with the backup workflow itself; returns its set id."""
    run = emu_run("backup", {"array": fixture.name})
    if run.status != "SUCCEEDED":
        raise AssertionError(f"backup of {fixture.name} failed: {run.error}: {run.cause}")
    return str(run.output["setId"])


def restored_volumes(execution_arn: str) -> list[dict[str, Any]]:
    """Every volume a restore execution created (live or not yet deleted), by member index."""
    ec2 = boto3.client("ec2")
    pages = ec2.get_paginator("describe_volumes").paginate(
        Filters=[{"Name": "tag:raidsnap:restore-execution", "Values": [execution_arn]}]
    )
    found = [dict(v) for page in pages for v in page["Volumes"]]
    return sorted(found, key=lambda v: int(tags_of(v).get("raidsnap:restored-member-index", "0")))


def terminate(instance_id: str) -> None:
    boto3.client("ec2").terminate_instances(InstanceIds=[instance_id])


# ---------------------------------------------------------------------- recovery and drills
#
# EventBridge events as AWS delivers them to a rule's Lambda target. Shapes from the AWS docs:
# CloudWatch "Alarm events and EventBridge" (single metric alarm state change), Amazon EC2
# "EC2 instance state-change events", and Amazon EC2 Auto Scaling "Lifecycle hook events"
# (EC2 Instance-launch Lifecycle Action).

ACCOUNT = "123456789012"
REGION = "us-east-1"


def alarm_event(
    instance_id: str,
    *,
    alarm_name: str = "raidsnap-attached-ebs-db1",
    at: str = "2026-11-21T06:00:00Z",
    state: str = "ALARM",
    event_id: str = "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
) -> dict[str, Any]:
    """CloudWatch Alarm State Change of an alarm on StatusCheckFailed_AttachedEBS."""
    timestamp = at.replace("Z", ".000+0000")
    return {
        "version": "0",
        "id": event_id,
        "detail-type": "CloudWatch Alarm State Change",
        "source": "aws.cloudwatch",
        "account": ACCOUNT,
        "time": at,
        "region": REGION,
        "resources": [f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:{alarm_name}"],
        "detail": {
            "alarmName": alarm_name,
            "state": {
                "value": state,
                "reason": "Threshold Crossed: 2 out of the last 2 datapoints [1.0 (21/11/26 "
                "05:59:00), 1.0 (21/11/26 05:58:00)] were greater than or equal to the "
                "threshold (1.0) (minimum 2 datapoints for OK -> ALARM transition).",
                "reasonData": '{"version":"1.0","queryDate":"' + timestamp + '"}',
                "timestamp": timestamp,
            },
            "previousState": {
                "value": "OK",
                "reason": "Threshold Crossed: no datapoints were received",
                "timestamp": "2026-11-20T06:00:00.000+0000",
            },
            "configuration": {
                "description": f"raidsnap: an attached EBS volume of {instance_id} fails",
                "metrics": [
                    {
                        "id": "7b2b4b1e-3a43-4c3e-b0c9-3e2e3c2d1f00",
                        "metricStat": {
                            "metric": {
                                "dimensions": {"InstanceId": instance_id},
                                "name": "StatusCheckFailed_AttachedEBS",
                                "namespace": "AWS/EC2",
                            },
                            "period": 60,
                            "stat": "Maximum",
                        },
                        "returnData": True,
                    }
                ],
            },
        },
    }


def instance_state_event(
    instance_id: str, state: str = "terminated", *, at: str = "2026-11-21T06:00:00Z"
) -> dict[str, Any]:
    """EC2 Instance State-change Notification."""
    return {
        "version": "0",
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        "detail-type": "EC2 Instance State-change Notification",
        "source": "aws.ec2",
        "account": ACCOUNT,
        "time": at,
        "region": REGION,
        "resources": [f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/{instance_id}"],
        "detail": {"instance-id": instance_id, "state": state},
    }


def launch_event(
    group: str,
    instance_id: str,
    *,
    hook: str = "raidsnap-db1",
    token: str = "87654321-4321-4321-4321-210987654321",  # noqa: S107 - a lifecycle action id
    at: str = "2026-11-21T06:00:00Z",
) -> dict[str, Any]:
    """EC2 Instance-launch Lifecycle Action of an Auto Scaling group's launch hook."""
    return {
        "version": "0",
        "id": "468fe059-f4b7-445f-bb22-2a271b94974d",
        "detail-type": "EC2 Instance-launch Lifecycle Action",
        "source": "aws.autoscaling",
        "account": ACCOUNT,
        "time": at,
        "region": REGION,
        "resources": [
            f"arn:aws:autoscaling:{REGION}:{ACCOUNT}:autoScalingGroup:"
            f"8c5b3a8e-2a4f-4b5a-9d6e-0f1e2d3c4b5a:autoScalingGroupName/{group}"
        ],
        "detail": {
            "LifecycleActionToken": token,
            "AutoScalingGroupName": group,
            "LifecycleHookName": hook,
            "EC2InstanceId": instance_id,
            "LifecycleTransition": "autoscaling:EC2_INSTANCE_LAUNCHING",
            "Origin": "EC2",
            "Destination": "AutoScalingGroup",
        },
    }


def configure_recovery(emu: Any, array: str, **settings: str) -> None:
    """Give the recovery trigger this array's recovery settings, as a config file would (the
    emulation's template is synthesized without one): instanceId, mode, replacementInstanceId,
    autoScalingGroup, initialization, mountPoint. Every function the template gives the map to
    (the recovery trigger, the drill's check) gets it, as from one config file."""
    for fn in emu.router.functions.values():
        if "RECOVERY_BY_ARRAY" not in fn.environment:
            continue
        current = json.loads(fn.environment.get("RECOVERY_BY_ARRAY") or "{}")
        current[array] = {"mode": "replace", **settings}
        fn.environment["RECOVERY_BY_ARRAY"] = json.dumps(current)
    named = [settings[k] for k in ("instanceId", "replacementInstanceId") if settings.get(k)]
    name_in_config(emu, array, *named, auto_scaling_group=settings.get("autoScalingGroup", ""))
    alarm = recovery_alarm(emu, array)
    if alarm and settings.get("instanceId"):
        # A stack deployed with this instance configured has its alarm watching it.
        _point_alarm(alarm, settings["instanceId"])


def configure_fast_restore(emu: Any, array: str, zones: list[str], sets: int = 1) -> None:
    """Give the array a fastRestore policy, as a config file would (arrays.<array>.fastRestore;
    the emulation's template is synthesized without one): every function the template gives
    the map to (the backup's KeepFsr, the sweeper) gets it, and the backup's Prepare the array's
    name (FAST_RESTORE_ARRAYS). ``sets=0`` removes the policy."""
    for fn in emu.router.functions.values():
        if "FAST_RESTORE_ARRAYS" in fn.environment:
            names = set(json.loads(fn.environment.get("FAST_RESTORE_ARRAYS") or "[]"))
            names = names | {array} if sets else names - {array}
            fn.environment["FAST_RESTORE_ARRAYS"] = json.dumps(sorted(names))
        if "FAST_RESTORE_BY_ARRAY" not in fn.environment:
            continue
        current = json.loads(fn.environment.get("FAST_RESTORE_BY_ARRAY") or "{}")
        if sets:
            current[array] = {"zones": zones, "sets": sets}
        else:
            current.pop(array, None)
        fn.environment["FAST_RESTORE_BY_ARRAY"] = json.dumps(current)


def configure_copies(emu: Any, array: str, places: list[dict[str, Any]]) -> None:
    """Give the array copies, as a config file would (arrays.<array>.copies, as COPIES_BY_ARRAY
    carries them: id, region, account, retention, stateMachineArn); every function the
    template gives the map to gets it. No places removes them."""
    for fn in emu.router.functions.values():
        if "COPIES_BY_ARRAY" not in fn.environment:
            continue
        current = json.loads(fn.environment.get("COPIES_BY_ARRAY") or "{}")
        if places:
            current[array] = places
        else:
            current.pop(array, None)
        fn.environment["COPIES_BY_ARRAY"] = json.dumps(current)


def configure_lock(emu: Any, array: str, **policy: Any) -> None:
    """Give the array a lock policy, as a config file would (arrays.<array>.lock: mode, days,
    sets, coolOffHours); no settings remove it. The grant to lock comes from the template: only
    a stack synthesized with some array's lock has it, bounded by the longest lock's days."""
    for fn in emu.router.functions.values():
        if "LOCK_BY_ARRAY" not in fn.environment:
            continue
        current = json.loads(fn.environment.get("LOCK_BY_ARRAY") or "{}")
        if policy:
            current[array] = policy
        else:
            current.pop(array, None)
        fn.environment["LOCK_BY_ARRAY"] = json.dumps(current)


def name_in_config(
    emu: Any, array: str, *instance_ids: str, auto_scaling_group: str = "", drill: bool = False
) -> None:
    """The config names these instances for the array: as its recovery instance or replacement
    (a restore may act on them and tag them if untagged), or with ``drill`` as its drill
    instance (copies only, never the array's own): plan.targets. Every function gets the map
    (ARRAY_INSTANCES), as from one config file."""
    for fn in emu.router.functions.values():
        if "ARRAY_INSTANCES" not in fn.environment:
            continue
        instances = json.loads(fn.environment.get("ARRAY_INSTANCES") or "{}")
        entry = instances.setdefault(array, {"instances": [], "copies": []})
        key = "copies" if drill else "instances"
        entry[key] = sorted({*entry.get(key, []), *instance_ids})
        if auto_scaling_group:
            entry["autoScalingGroup"] = auto_scaling_group
        fn.environment["ARRAY_INSTANCES"] = json.dumps(instances)


def recovery_started_by_alarm(emu: Any, alarm: str) -> str:
    """The alarm (logical id) goes to ALARM and EventBridge delivers its event: the ARN of the
    one recovery that started."""
    before = len(emu.router.invocations)
    deliveries = emu.services.alarm(alarm)
    assert any(d.delivered for d in deliveries), deliveries
    started = [
        i.result
        for i in emu.router.invocations[before:]
        if i.module == "recovery_start" and i.result and i.result.get("started")
    ]
    assert len(started) == 1, [i.result for i in emu.router.invocations[before:]]
    return str(started[0]["executionArn"])


def attach_recovery_onto_standby(emu: Any, array: str) -> tuple[ArrayFixture, str, str]:
    """A backed-up two-member array whose recovery restores onto a standby in attach mode: the
    array, the standby, and the name of the array's alarm (watching the array's instance)."""
    fx = make_array(emu.hosts, array, 2)
    backed_up(emu.hosts, emu.run, fx)
    standby = launch_instance(f"{array}-standby", fx.availability_zone, tag_array=False)
    configure_recovery(
        emu, array, instanceId=fx.instance_id, mode="attach", replacementInstanceId=standby
    )
    alarm = recovery_alarm(emu, array)
    assert alarm is not None
    return fx, standby, alarm


def instance_tags(instance_id: str) -> dict[str, str]:
    found = boto3.client("ec2").describe_instances(InstanceIds=[instance_id])["Reservations"]
    return {t["Key"]: t["Value"] for t in found[0]["Instances"][0].get("Tags", [])}


def recovery_alarm(emu: Any, array: str) -> str | None:
    """The name (logical id) of the array's attached-EBS alarm, where the stack has one."""
    for logical_id, res in emu.template.of_type("AWS::CloudWatch::Alarm").items():
        if f"(array {array})" in str(res["Properties"].get("AlarmDescription", "")):
            return str(logical_id)
    return None


def _point_alarm(alarm: str, instance_id: str) -> None:
    cloudwatch = boto3.client("cloudwatch")
    found = cloudwatch.describe_alarms(AlarmNames=[alarm])["MetricAlarms"][0]
    old = {d["Name"]: d["Value"] for d in found["Dimensions"]}["InstanceId"]
    cloudwatch.put_metric_alarm(
        AlarmName=alarm,
        AlarmDescription=str(found.get("AlarmDescription", "")).replace(old, instance_id),
        ActionsEnabled=found["ActionsEnabled"],
        OKActions=found["OKActions"],
        AlarmActions=found["AlarmActions"],
        InsufficientDataActions=found["InsufficientDataActions"],
        MetricName=found["MetricName"],
        Namespace=found["Namespace"],
        Statistic=found["Statistic"],
        Dimensions=[{"Name": "InstanceId", "Value": instance_id}],
        Period=found["Period"],
        EvaluationPeriods=found["EvaluationPeriods"],
        DatapointsToAlarm=found["DatapointsToAlarm"],
        Threshold=found["Threshold"],
        ComparisonOperator=found["ComparisonOperator"],
        TreatMissingData=found["TreatMissingData"],
    )


def create_topics(emu: Any) -> list[str]:
    """The stack's SNS topics, as the template names them (the harness creates none)."""
    sns = boto3.client("sns")
    return [
        sns.create_topic(Name=str(emu.template.get_att(logical_id, "TopicName")))["TopicArn"]
        for logical_id in emu.template.of_type("AWS::SNS::Topic")
    ]


class HeldStep:
    """Holds one invocation of one function (the first, or the nth) until released, so that a
    test can act while a workflow is inside that step (e.g. while a restore holds its lock). The
    held step waits for the test, not for time: other executions' waits go on meanwhile (but no
    Task's timeout runs out: clock.py)."""

    def __init__(self, emu: Any, module: str, nth: int = 1) -> None:
        """Hold the ``nth`` invocation of the function (the first by default)."""
        router = emu.router
        self.function = next(
            n for n, f in router.functions.items() if f.handler.endswith(f".{module}.handler")
        )
        self.reached = threading.Event()
        self._go_on = threading.Event()
        self._held = False
        self._seen = 0

        counting = threading.Lock()

        def invoke(params: dict[str, Any]) -> Any:
            hold = False
            if str(params["FunctionName"]).rsplit(":", 1)[-1] == self.function:
                with counting:
                    self._seen += 1
                    hold = self._seen == nth and not self._held
                    self._held = self._held or hold
            if hold:
                self.reached.set()
                with emu.clock.waiting(
                    lambda: not self._go_on.is_set(),
                    f"the test to release {self.function}",
                    outside=True,
                ):
                    self._go_on.wait(120)
            return router(params)

        emu.double.route("lambda", "Invoke", invoke)

    def wait(self, timeout: float = 60) -> None:
        if not self.reached.wait(timeout):
            raise TimeoutError(f"{self.function} was never invoked")

    def release(self) -> None:
        self._go_on.set()
