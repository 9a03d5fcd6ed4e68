"""Automated recovery: an EventBridge event about a failing array becomes one recovery run.

Three events start a recovery (see lib/constructs/recovery.ts for the rules):
- the array instance's ``StatusCheckFailed_AttachedEBS`` alarm going to ALARM: restore the
  latest set in replace mode on the same instance, or in attach mode onto the configured
  replacement;
- the array instance terminated, where a replacement is configured: restore onto it;
- an instance launching into the array's Auto Scaling group of one (a launch lifecycle hook
  holds it in Pending:Wait): restore onto the new instance, then CONTINUE or ABANDON.

Each event maps to one execution name, so an event delivered twice starts one recovery.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from raidsnap import assessment, clients, protection, tags
from raidsnap.aws import error_code, lock
from raidsnap.aws import instances as arrays
from raidsnap.environment import RecoverySettings
from raidsnap.errors import InstanceNotReadyError, public_name
from raidsnap.observability import logger

ALARM = ("aws.cloudwatch", "CloudWatch Alarm State Change")
STATE_CHANGE = ("aws.ec2", "EC2 Instance State-change Notification")
LAUNCH = ("aws.autoscaling", "EC2 Instance-launch Lifecycle Action")
# Instance states that mean the array's instance is gone for good. A stopped instance keeps its
# volumes and comes back with them when started: that is no reason to restore elsewhere.
LOST_STATES = ("terminated",)

TARGET_POLL_SECONDS = 15
# A launching instance boots and registers its SSM agent within a few minutes; past this the
# recovery gives up (and a lifecycle action is abandoned).
TARGET_BUDGET_SECONDS = 900

# Execution names of a state machine that logs may hold only 0-9, A-Z, a-z, - and _
# (StartExecution API reference, name); an array name may also hold ".".
_NAME_SAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class Trigger:
    """What an event asks for: which array, restored how, and which execution name."""

    kind: str
    array: str
    key: str
    restore: dict[str, Any]
    lifecycle: dict[str, str] | None = None
    notes: list[str] = field(default_factory=list)
    # An instance that is still running but gives up the array (attach mode onto a replacement).
    retire: str | None = None
    # The instance whose attached-EBS alarm fired: a recovery looks for evidence there first.
    alarmed: str | None = None

    @property
    def execution_name(self) -> str:
        """``<kind>-<array>-<hash of the event's identity>``, at most 72 characters: the
        nested restore is named after it with ``-restore`` appended (80 at most)."""
        digest = hashlib.sha256(self.key.encode()).hexdigest()[:24]
        array = _NAME_SAFE.sub("-", self.array)[:32]
        return f"{self.kind}-{array}-{digest}"


@dataclass(frozen=True)
class Skip:
    """An event about an array's instance that must start no recovery, and why (the operators
    are told: a recovery that does not start is news)."""

    kind: str
    array: str
    reason: str


def start(event: dict[str, Any], settings: RecoverySettings) -> dict[str, Any]:
    """Start one recovery for the event, or say why not (to the operators as well: a recovery
    that does not start is news). Never raises for an event that is simply not ours:
    EventBridge would only deliver it again."""
    trigger = classify(event, settings)
    if trigger is None:
        return {"started": False, "reason": "not a recovery event for a raidsnap array"}
    if isinstance(trigger, Skip):
        logger.warning(
            "no recovery started", extra={"array": trigger.array, "reason": trigger.reason}
        )
        facts = assessment.latest_set(trigger.array, _event_time(event))
        notify(
            f"raidsnap: no recovery of {trigger.array} started",
            f"A {trigger.kind} event ({event.get('detail-type')}, {event.get('time')}) started "
            f"no recovery: {trigger.reason}. "
            + (facts.sentence(trigger.array) + "." if facts else "It has no complete set."),
        )
        return {"started": False, "array": trigger.array, "reason": trigger.reason}
    name = trigger.execution_name
    machine = settings.state_machine_arn
    # One recovery of an array at a time: a flapping alarm (ALARM, OK, ALARM) must not start
    # one replace per transition. The claim is this execution's until it ends.
    repeat = _claimed_by(settings.lock_table, trigger.array) == name
    other = claim(settings.lock_table, trigger.array, name, machine)
    if other is not None:
        reason = (
            f"already recovering {trigger.array}: a recovery of it is already running "
            f"({other}); this {trigger.kind} event started no second recovery"
        )
        _skipped(trigger, event, reason)
        return {"started": False, "array": trigger.array, "reason": reason}
    holder = lock.current(settings.lock_table, trigger.array)
    running = (
        holder is not None
        and holder.lease_until > int(time.time())
        and lock.running(holder.execution_arn)
    )
    if holder is not None and running and is_drill(holder.execution_arn):
        # A drill must never stand between an array and its recovery: stop the drill's restore
        # (its drill then removes what that restore created, and reports the drill failed).
        clients.stepfunctions().stop_execution(
            executionArn=holder.execution_arn,
            error="PreemptedByRecovery",
            cause=f"a recovery of {trigger.array} needs the array's restore lock",
        )
        trigger.notes.append(f"stopped the drill restore {holder.execution_arn} to recover")
        logger.warning("stopped a drill's restore", extra={"holder": holder.execution_arn})
    elif holder is not None and running and holder.execution_arn.endswith(f":{name}-restore"):
        # This very event's recovery is running (its restore holds the lock): a repeat delivery.
        logger.info("recovery for this event is running", extra={"execution_name": name})
        return {"started": False, "array": trigger.array, "name": name, "reason": "duplicate"}
    elif holder is not None and running:
        unclaim(settings.lock_table, trigger.array, name)
        reason = f"a restore of {trigger.array} is already running ({holder.execution_arn})"
        logger.warning("no recovery started", extra={"array": trigger.array, "reason": reason})
        _skipped(trigger, event, reason)
        return {"started": False, "array": trigger.array, "reason": reason}
    payload = {
        "array": trigger.array,
        "trigger": trigger.kind,
        "event": {
            "id": event.get("id"),
            "source": event.get("source"),
            "detailType": event.get("detail-type"),
            "time": event.get("time"),
            "resources": event.get("resources") or [],
        },
        "restore": trigger.restore,
        "lifecycle": trigger.lifecycle,
        "retire": trigger.retire,
        "alarmedInstanceId": trigger.alarmed,
        "notes": trigger.notes,
    }
    asked_at = datetime.now(UTC)
    try:
        answer = clients.stepfunctions().start_execution(
            stateMachineArn=machine, name=name, input=json.dumps(payload, sort_keys=True)
        )
    except ClientError as err:
        if error_code(err) != "ExecutionAlreadyExists":
            raise
        logger.info("recovery for this event already started", extra={"execution_name": name})
        return {"started": False, "array": trigger.array, "name": name, "reason": "duplicate"}
    arn = answer["executionArn"]
    # The same name and input as a running execution: StartExecution succeeds and answers with
    # that execution, started before this call (StartExecution, Step Functions API Reference).
    started_at = answer["startDate"]
    if started_at.tzinfo is None:
        started_at = started_at.replace(tzinfo=UTC)
    if repeat and started_at < asked_at:
        logger.info("recovery for this event is running", extra={"execution": arn})
        return {
            "started": False,
            "array": trigger.array,
            "name": name,
            "executionArn": arn,
            "reason": "duplicate",
        }
    logger.info("recovery started", extra={"array": trigger.array, "execution": arn})
    return {"started": True, "array": trigger.array, "name": name, "executionArn": arn}


def _skipped(trigger: Trigger, event: dict[str, Any], reason: str) -> None:
    facts = assessment.latest_set(trigger.array, _event_time(event))
    notify(
        f"raidsnap: no recovery of {trigger.array} started",
        f"A {trigger.kind} event for {trigger.array} ({event.get('detail-type')}, "
        f"{event.get('time')}) started no recovery: {reason}. "
        + (facts.sentence(trigger.array) + "." if facts else "It has no complete set.")
        + " Check the running restore or recovery; start a restore by hand if the array still "
        "needs one once it has ended.",
    )


def _event_time(event: dict[str, Any]) -> datetime:
    raw = str(event.get("time") or "")
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return datetime.now(UTC)


# ---------------------------------------------------------------------- one at a time

CLAIM_SUFFIX = "#recovery"  # array names never hold "#": no clash with a restore lock's item


def claim(table: str, array: str, name: str, machine_arn: str) -> str | None:
    """Claim the array's recovery for execution ``name`` (idempotent for the same name); returns
    the execution that holds it instead, if one still runs."""
    ddb = clients.dynamodb()
    key = {"array": {"S": array + CLAIM_SUFFIX}}
    item = key | {
        "executionName": {"S": name},
        "claimedAt": {"N": str(int(time.time()))},
        # DynamoDB's TTL removes a claim its execution (73 hours at most) never gave back.
        "expiresAt": {"N": str(int(time.time()) + 4 * 86400)},
    }
    try:
        ddb.put_item(
            TableName=table,
            Item=item,
            ConditionExpression="attribute_not_exists(#a) OR executionName = :me",
            ExpressionAttributeNames={"#a": "array"},
            ExpressionAttributeValues={":me": {"S": name}},
        )
    except ClientError as err:
        if error_code(err) != "ConditionalCheckFailedException":
            raise
    else:
        return None
    holder = _claimed_by(table, array)
    holder_arn = machine_arn.replace(":stateMachine:", ":execution:", 1) + ":" + holder
    if holder and lock.running(holder_arn):
        return holder_arn
    try:  # the holder ended without giving the claim back (stopped, timed out): take it over
        ddb.put_item(
            TableName=table,
            Item=item,
            ConditionExpression="executionName = :old",
            ExpressionAttributeValues={":old": {"S": holder}},
        )
    except ClientError as err:
        if error_code(err) == "ConditionalCheckFailedException":
            return "another recovery that started at the same moment"
        raise
    return None


def _claimed_by(table: str, array: str) -> str:
    """The execution name holding the array's recovery claim ("" when none does)."""
    held = (
        clients.dynamodb()
        .get_item(TableName=table, Key={"array": {"S": array + CLAIM_SUFFIX}}, ConsistentRead=True)
        .get("Item")
        or {}
    )
    return str(held.get("executionName", {}).get("S", ""))


def unclaim(table: str, array: str, name: str) -> None:
    try:
        clients.dynamodb().delete_item(
            TableName=table,
            Key={"array": {"S": array + CLAIM_SUFFIX}},
            ConditionExpression="executionName = :me",
            ExpressionAttributeValues={":me": {"S": name}},
        )
    except ClientError as err:
        if error_code(err) != "ConditionalCheckFailedException":
            raise


def notify(subject: str, message: str) -> None:
    """Tell the operators (when the stack has a notification topic)."""
    topic = os.environ.get("TOPIC_ARN", "").strip()
    if not topic:
        logger.warning("no topic to notify", extra={"subject": subject, "text": message})
        return
    clients.sns().publish(TopicArn=topic, Subject=subject[:100], Message=message)


def is_drill(execution_arn: str) -> bool:
    """Restores a drill starts are named drill-<hash> (see drill.py)."""
    return execution_arn.rsplit(":", 1)[-1].startswith("drill-")


# ---------------------------------------------------------------------- events


def classify(event: dict[str, Any], settings: RecoverySettings) -> Trigger | Skip | None:
    kind = (event.get("source"), event.get("detail-type"))
    detail = event.get("detail") or {}
    if kind == ALARM:
        return _from_alarm(event, detail, settings)
    if kind == STATE_CHANGE:
        return _from_state_change(event, detail, settings)
    if kind == LAUNCH:
        return _from_launch(detail, settings)
    logger.warning("ignored event", extra={"source": kind[0], "detailType": kind[1]})
    return None


def _restore_input(array: str, config: dict[str, str], **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"array": array, "setId": "latest", **fields}
    if config.get("initialization"):
        out["initialization"] = config["initialization"]
    return out


def _array_of_instance(instance_id: str, settings: RecoverySettings) -> tuple[str, dict[str, str]]:
    """The array whose configured instance (or replacement) this is, else the array the instance
    is tagged with: after a move the alarm watches an instance the config may not name (an
    array without recovery config still recovers in place)."""
    for array, config in settings.by_array.items():
        if instance_id in (config.get("instanceId"), config.get("replacementInstanceId")):
            return array, config
    tagged = instance_facts(instance_id)[1].get(tags.ARRAY, "")
    return tagged, settings.by_array.get(tagged, {})


def _holder(array: str, config: dict[str, str], besides: str) -> str | None:
    """The other configured instance of the array (instance or replacement) if it carries the
    array's tag: the array was moved there."""
    for candidate in (config.get("instanceId"), config.get("replacementInstanceId")):
        if candidate and candidate != besides:
            state, found = instance_facts(candidate)
            if state not in ("terminated", "unknown") and found.get(tags.ARRAY) == array:
                return candidate
    return None


def instance_facts(instance_id: str) -> tuple[str, dict[str, str]]:
    """(state, tags) of an instance; ("unknown", {}) when EC2 does not know it."""
    try:
        found = clients.ec2().describe_instances(InstanceIds=[instance_id])["Reservations"]
    except ClientError as err:
        if error_code(err).startswith("InvalidInstanceID"):
            return "unknown", {}
        raise
    raw = found[0]["Instances"][0] if found and found[0]["Instances"] else {}
    state = str(raw.get("State", {}).get("Name", "unknown"))
    return state, tags.as_dict(raw.get("Tags"))  # type: ignore[arg-type]


def _from_alarm(
    event: dict[str, Any], detail: dict[str, Any], settings: RecoverySettings
) -> Trigger | Skip | None:
    state = detail.get("state") or {}
    if state.get("value") != "ALARM":
        return None
    instance_id = ""
    for metric in (detail.get("configuration") or {}).get("metrics") or []:
        dims = ((metric.get("metricStat") or {}).get("metric") or {}).get("dimensions") or {}
        instance_id = instance_id or str(dims.get("InstanceId", ""))
    if not instance_id:
        logger.warning("alarm without an InstanceId dimension", extra={"alarm": detail})
        return None
    array, config = _array_of_instance(instance_id, settings)
    if not array:
        logger.warning("alarm for an instance of no array", extra={"instance": instance_id})
        return None
    if instance_facts(instance_id)[1].get(tags.ARRAY) != array:
        moved_to = _holder(array, config, instance_id)
        if moved_to:
            return Skip(
                "alarm",
                array,
                f"the attached EBS alarm of {instance_id} fired, but {array} is no longer on it: "
                f"a recovery moved it to {moved_to}",
            )
    alarm_arn = (event.get("resources") or [detail.get("alarmName", "")])[0]
    key = f"{alarm_arn}|{state.get('timestamp') or event.get('time')}"
    replacement = config.get("replacementInstanceId")
    if (
        config.get("mode") == "attach"
        and replacement
        and instance_id == config.get("instanceId")
        and replacement != instance_id
    ):
        # The failed instance still runs and still carries the array's tag; the array moves to
        # the replacement, so the recovery takes the tag off it first (and puts it back if the
        # restore fails).
        restore = _restore_input(array, config, mode="attach", targetInstanceId=replacement)
        note = f"attached EBS of {instance_id} failed; restoring onto {replacement}"
        return Trigger(
            "alarm", array, key, restore, notes=[note], retire=instance_id, alarmed=instance_id
        )
    # In replace mode, and wherever the array lives once a recovery has moved it (the
    # configured replacement holds it already): the array is replaced where it is.
    restore = _restore_input(array, config, mode="replace", targetInstanceId=instance_id)
    note = f"attached EBS of {instance_id} failed; replacing the array in place"
    return Trigger("alarm", array, key, restore, notes=[note], alarmed=instance_id)


def _from_state_change(
    event: dict[str, Any], detail: dict[str, Any], settings: RecoverySettings
) -> Trigger | Skip | None:
    instance_id = str(detail.get("instance-id", ""))
    state = str(detail.get("state", ""))
    if state not in LOST_STATES:
        return None
    for array, config in settings.by_array.items():
        configured, replacement = config.get("instanceId"), config.get("replacementInstanceId")
        if instance_id not in (configured, replacement):
            continue
        # A terminated instance stays visible, tags included, for a while after it ends.
        holds = instance_facts(instance_id)[1].get(tags.ARRAY) == array
        if instance_id != configured:  # the replacement
            if holds:
                return Skip(
                    "lost",
                    array,
                    f"{instance_id}, where a recovery had moved {array}, is {state}, and no "
                    "other instance is configured to restore onto: start a restore onto a new "
                    "instance by hand and configure it as the array's instance",
                )
            return Skip(
                "lost",
                array,
                f"{instance_id}, the configured replacement of {array}, is {state}: {array} "
                f"has no replacement now; configure a new replacementInstanceId",
            )
        moved_to = None if holds else _holder(array, config, instance_id)
        if moved_to:
            return Skip(
                "lost",
                array,
                f"{instance_id} is {state}, but {array} is no longer on it: a recovery moved "
                f"it to {moved_to}, which holds it; nothing to restore",
            )
        if not replacement:
            logger.warning("instance lost, no replacement configured", extra={"array": array})
            return None
        key = f"{instance_id}|{state}|{event.get('time')}"
        restore = _restore_input(array, config, mode="attach", targetInstanceId=replacement)
        note = f"{instance_id} is {state}; restoring onto the replacement {replacement}"
        return Trigger("lost", array, key, restore, notes=[note])
    return None


def _from_launch(detail: dict[str, Any], settings: RecoverySettings) -> Trigger | None:
    group = str(detail.get("AutoScalingGroupName", ""))
    instance_id = str(detail.get("EC2InstanceId", ""))
    token = str(detail.get("LifecycleActionToken", ""))
    if detail.get("LifecycleTransition", "autoscaling:EC2_INSTANCE_LAUNCHING") != (
        "autoscaling:EC2_INSTANCE_LAUNCHING"
    ):
        return None
    for array, config in settings.by_array.items():
        if config.get("autoScalingGroup") != group or not (instance_id and token):
            continue
        restore = _restore_input(array, config, mode="attach", targetInstanceId=instance_id)
        lifecycle = {
            "autoScalingGroupName": group,
            "lifecycleHookName": str(detail.get("LifecycleHookName", "")),
            "lifecycleActionToken": token,
            "instanceId": instance_id,
        }
        note = f"{instance_id} launched into {group}; restoring onto it"
        return Trigger("launch", array, token, restore, lifecycle, [note])
    return None


# ---------------------------------------------------------------------- in the workflow

# A restore's states once its array is assembled and mounted (restore.asl.json).
ASSEMBLED_STATES = frozenset(
    {"Prewarm", "WaitForPrewarm", "PollPrewarm", "IsPrewarmed", "Finish", "FinishedWithWarnings"}
)
FOLLOW_POLL_SECONDS = 300


def assess(state: dict[str, Any], discover_document: str) -> dict[str, Any]:
    """Is there evidence that a member is impaired? Only an alarm needs it: a terminated
    instance and a launch into the array's group are the evidence themselves."""
    given = state.get("input") or {}
    look = dict(state.get("assessment") or {})
    if given.get("trigger") != "alarm" or not given.get("alarmedInstanceId"):
        return {"status": "act", "evidence": [str(n) for n in given.get("notes") or []]}
    if not look:
        return assessment.start(
            str(given["array"]), str(given["alarmedInstanceId"]), discover_document
        )
    return assessment.poll(look)


def _reference_time(state: dict[str, Any]) -> datetime:
    event = (state.get("input") or {}).get("event") or {}
    return _event_time({"time": event.get("time")})


def no_action(state: dict[str, Any], table: str) -> dict[str, Any]:
    """The alarm fired, but no member of the array is impaired: replace nothing, say why."""
    given = state.get("input") or {}
    array = str(given.get("array"))
    look = state.get("assessment") or {}
    facts = assessment.latest_set(array, _reference_time(state))
    instance = given.get("alarmedInstanceId")
    message = (
        f"The attached EBS alarm of {instance} fired, but no member of {array} is impaired: "
        f"EC2's status checks of members {look.get('checked')} passed"
        + (
            ", and the instance reports the array healthy"
            if look.get("discovery") == "done"
            else f" (the instance could not be asked: {look.get('discovery')})"
        )
        + ". The alarm covers every attached volume (the boot volume and scratch volumes "
        "too); no recovery was started and the array was not touched. "
        + (
            "If it needs restoring after all: " + facts.sentence(array) + "."
            if facts
            else f"{array} has no complete set."
        )
    )
    notify(f"raidsnap: {array} alarm, no member impaired, nothing replaced", message)
    unclaim(table, array, str((state.get("execution") or {}).get("name") or ""))
    return {
        "output": {
            "array": array,
            "trigger": given.get("trigger"),
            "action": "none",
            "checked": look.get("checked"),
            "discovery": look.get("discovery"),
            "set": facts.as_dict() if facts else None,
            "message": message,
        }
    }


def start_restore(state: dict[str, Any], restore_machine_arn: str) -> dict[str, Any]:
    """Start the restore (named after this execution, so a retried step starts no second one)
    and tell the operators which set it restores and what that means for their data."""
    given = state.get("input") or {}
    array = str(given.get("array"))
    name = f"{(state.get('execution') or {}).get('name')}-restore"
    try:
        arn = clients.stepfunctions().start_execution(
            stateMachineArn=restore_machine_arn, name=name, input=json.dumps(given["restore"])
        )["executionArn"]
    except ClientError as err:
        if error_code(err) != "ExecutionAlreadyExists":
            raise
        arn = restore_machine_arn.replace(":stateMachine:", ":execution:", 1) + ":" + name
    facts = assessment.latest_set(array, _reference_time(state))
    restore = given["restore"]
    evidence = (state.get("assessment") or {}).get("evidence") or []
    notify(
        f"raidsnap: recovering {array}",
        f"Recovery of {array}: restoring onto {restore.get('targetInstanceId') or 'its instance'} "
        f"in {restore.get('mode')} mode (restore {arn}), because: {'; '.join(evidence)}. "
        + (facts.sentence(array) + "." if facts else f"{array} has no complete set."),
    )
    return {
        "executionArn": arn,
        "status": "running",
        "waitSeconds": _follow_wait(state),
        "lifecycleAction": None,
        "heartbeats": 0,
    }


def _follow_wait(state: dict[str, Any]) -> int:
    """Often enough to keep a lifecycle action alive (a third of its heartbeat timeout)."""
    if (state.get("input") or {}).get("lifecycle"):
        return max(
            30,
            min(
                FOLLOW_POLL_SECONDS, int(os.environ.get("LIFECYCLE_HEARTBEAT_SECONDS", "3600")) // 3
            ),
        )
    return FOLLOW_POLL_SECONDS


def follow_restore(state: dict[str, Any]) -> dict[str, Any]:
    """One look at the restore. A launching instance's lifecycle action gets a heartbeat while
    the restore runs, and CONTINUE as soon as the array is assembled and mounted (its prewarm
    may read for hours longer; the instance is usable meanwhile)."""
    r = dict(state["restore"])
    sfn = clients.stepfunctions()
    desc = sfn.describe_execution(executionArn=r["executionArn"])
    status = desc["status"]
    lifecycle = (state.get("input") or {}).get("lifecycle")
    if lifecycle and r.get("lifecycleAction") is None:
        if status == "SUCCEEDED" or (status == "RUNNING" and _assembled(r["executionArn"])):
            complete_lifecycle_action(lifecycle, "CONTINUE")
            r["lifecycleAction"] = "CONTINUE"
        elif status == "RUNNING":
            r["heartbeats"] = int(r.get("heartbeats") or 0) + _heartbeat(lifecycle)
    if status == "RUNNING":
        return dict(r, status="running", waitSeconds=_follow_wait(state))
    if status == "SUCCEEDED":
        return dict(r, status="succeeded", output=json.loads(desc.get("output") or "{}"))
    cause = str(desc.get("cause") or "")
    if status in ("ABORTED", "TIMED_OUT") and not desc.get("error"):
        word = "stopped" if status == "ABORTED" else "timed out"
        error = "RestoreAborted" if status == "ABORTED" else "RestoreTimedOut"
        cause = f"the restore {r['executionArn']} was {word} before it finished"
    else:
        error = public_name(str(desc.get("error") or "RestoreFailed"))
        cause += f" (restore {r['executionArn']})"
    return dict(r, status="failed", error={"Error": error, "Cause": cause})


def _assembled(restore_arn: str) -> bool:
    """Has the restore passed its assembly (its newest state is one it enters only after the
    array is assembled and mounted)?"""
    events = clients.stepfunctions().get_execution_history(
        executionArn=restore_arn, reverseOrder=True, maxResults=50
    )["events"]
    for event in events:
        entered = event.get("stateEnteredEventDetails")
        if entered:
            return str(entered.get("name")) in ASSEMBLED_STATES
    return False


def _heartbeat(lifecycle: dict[str, str]) -> int:
    try:
        clients.autoscaling().record_lifecycle_action_heartbeat(
            LifecycleHookName=lifecycle["lifecycleHookName"],
            AutoScalingGroupName=lifecycle["autoScalingGroupName"],
            LifecycleActionToken=lifecycle["lifecycleActionToken"],
        )
    except ClientError as err:
        if error_code(err) == "ValidationError":
            # Past its global timeout (100 heartbeat timeouts or 48 hours, whichever is less)
            # the action ends with its default result; nothing more to keep alive.
            logger.warning("lifecycle action no longer open", extra=lifecycle)
            return 0
        raise
    return 1


def check_target(state: dict[str, Any]) -> dict[str, Any]:
    """Is the restore's target running with its SSM agent online? A launching instance needs a
    few minutes; the restore itself would refuse an instance whose agent is not online yet."""
    target = dict(state.get("target") or {})
    restore = (state.get("input") or {}).get("restore") or {}
    instance_id = str(restore.get("targetInstanceId", ""))
    if not target:
        target = {"budgetSeconds": TARGET_BUDGET_SECONDS, "waitSeconds": TARGET_POLL_SECONDS}
    else:
        target["budgetSeconds"] = int(target["budgetSeconds"]) - int(target["waitSeconds"])
    if not instance_id:
        return dict(target, status="ready")  # the restore resolves the array's instance
    instance_state = instance_facts(instance_id)[0]
    agent = arrays.agent(instance_id) if instance_state == "running" else None
    if agent is not None and agent.online and agent.too_old:
        # Waiting does not make an agent newer: refuse now, before any tag is moved.
        raise InstanceNotReadyError(
            f"recovery target: {agent.too_old_reason()}; nothing was restored"
        )
    online = agent is not None and agent.online
    if online:
        # Only once the restore can start: a recovery that ends here leaves the tags as they were.
        retired = _retire((state.get("input") or {}).get("retire"), restore)
        return dict(target, status="ready", instanceId=instance_id, retired=retired)
    if instance_state in ("shutting-down", "terminated", "stopping", "stopped", "unknown"):
        raise InstanceNotReadyError(
            f"recovery target {instance_id} is {instance_state}; nothing was restored"
        )
    if target["budgetSeconds"] <= 0:
        raise InstanceNotReadyError(
            f"the SSM agent of recovery target {instance_id} did not come online within "
            f"{TARGET_BUDGET_SECONDS} s ({instance_state}); nothing was restored. Check the "
            "instance profile and the agent, then start a restore"
        )
    return dict(target, status="waiting", instanceId=instance_id)


def _retire(instance_id: str | None, restore: dict[str, Any]) -> str | None:
    """Take the array's tag off a failed instance that still runs (only that tag, only if it
    names this array), so that the restore makes the replacement the array's instance."""
    array = str(restore.get("array", ""))
    if not instance_id or not array or instance_facts(instance_id)[1].get(tags.ARRAY) != array:
        return None
    clients.ec2().delete_tags(Resources=[instance_id], Tags=[{"Key": tags.ARRAY, "Value": array}])
    logger.info("array tag moved off the failed instance", extra={"instance": instance_id})
    return instance_id


def _array_on_target(state: dict[str, Any]) -> str | None:
    """The restore's target, if the array lives there now: the restore tags its target when it
    attaches, and its failure path takes the tag off again unless it kept the volumes because
    the array was assembled and mounted there (an assembled array is the user's)."""
    given = state.get("input") or {}
    target = str((given.get("restore") or {}).get("targetInstanceId") or "")
    array = str(given.get("array", ""))
    if not target or not array:
        return None
    instance_state, found = instance_facts(target)
    if instance_state in ("terminated", "shutting-down", "unknown"):
        return None
    return target if found.get(tags.ARRAY) == array else None


def _unretire(state: dict[str, Any], array_on_target: str | None) -> str:
    """Give the array's tag back to the instance the recovery took it from, unless the array
    lives on the target after all. The intent comes from the run's input, not from what the
    target step recorded: a retried step finds the tag already gone and records nothing."""
    given = state.get("input") or {}
    retired = (state.get("target") or {}).get("retired") or given.get("retire")
    array = str(given.get("array", ""))
    if not retired or not array:
        return ""
    if array_on_target:
        return (
            f" [{array} stays on {array_on_target}, where the restore assembled and mounted it; "
            f"{retired} keeps no {tags.ARRAY} tag]"
        )
    if instance_facts(str(retired))[1].get(tags.ARRAY) == array:
        return ""
    clients.ec2().create_tags(Resources=[retired], Tags=[{"Key": tags.ARRAY, "Value": array}])
    return f" [{retired} is tagged {tags.ARRAY}={array} again: backups follow it as before]"


def _notify_recovered(subject: str, message: str) -> str | None:
    """Tell the operators; a notification that cannot be sent does not undo a recovery."""
    try:
        notify(subject, message)
    except ClientError as err:
        logger.exception("recovery notification not sent", extra={"subject": subject})
        return f"not sent: {error_code(err)}"
    return None


def finish(state: dict[str, Any], outcome: str, table: str) -> dict[str, Any]:
    """Complete the lifecycle action (if any, and not completed yet) with CONTINUE or ABANDON,
    give the array's recovery claim back, and shape the run's output, or its named error and
    cause. Both name the set restored, its age, and that writes after it are not in it."""
    given = state.get("input") or {}
    lifecycle = given.get("lifecycle")
    array = str(given.get("array"))
    restore = state.get("restore") or {}
    facts = assessment.latest_set(array, _reference_time(state))
    if outcome == "succeeded":
        restored = restore.get("output") or {}
        result = "CONTINUE"
        taken = restored.get("setTakenAt")
        message = (
            f"{array} was restored from set {restored.get('setId')}, taken {taken}"
            + (
                f" ({assessment.age_text(facts.age_minutes)} before the {given.get('trigger')})"
                if facts and facts.set_id == restored.get("setId")
                else ""
            )
            + f"; writes made after that time to {array} are not in it"
        )
        target = str(restored.get("targetInstanceId") or given["restore"].get("targetInstanceId"))
        guard = protection.follow(array, target)
        message += ". Protection: " + guard.sentence()
        unsent = _notify_recovered(f"raidsnap: {array} recovered onto {target}", message)
        out: dict[str, Any] = {
            "output": {
                "array": array,
                "trigger": given.get("trigger"),
                "action": "restored",
                "evidence": (state.get("assessment") or {}).get("evidence") or [],
                "set": facts.as_dict()
                if facts and facts.set_id == restored.get("setId")
                else {"setId": restored.get("setId"), "takenAt": taken, "ageMinutes": None},
                "message": message,
                "restoreExecutionArn": restore.get("executionArn"),
                "restore": restored,
                "lifecycleAction": None,
                "protection": guard.as_dict(),
                "notification": unsent or "sent",
            }
        }
    else:
        error, cause = child_failure(state.get("error") or restore.get("error") or {})
        moving = given.get("restore", {}).get("mode") == "attach"
        on_target = _array_on_target(state) if moving else None
        cause += _unretire(state, on_target)
        if on_target:
            # The array lives there now, whatever failed after it was mounted: so does its alarm.
            cause += f" [protection: {protection.follow(array, on_target).sentence()}]"
        if facts:
            cause += f" [{facts.sentence(array)}]"
        # A launched instance that holds the mounted array goes into service with it.
        result = "CONTINUE" if on_target else "ABANDON"
        out = {"error": error, "cause": cause, "lifecycleAction": None}
    unclaim(table, array, str((state.get("execution") or {}).get("name") or ""))
    if lifecycle and restore.get("lifecycleAction"):
        result = str(restore["lifecycleAction"])  # completed once the array was assembled
        if outcome == "succeeded":
            out["output"]["lifecycleAction"] = result
        else:
            out["lifecycleAction"] = result
    elif lifecycle:
        complete_lifecycle_action(lifecycle, result)
        if outcome == "succeeded":
            out["output"]["lifecycleAction"] = result
        else:
            out["lifecycleAction"] = result
            out["cause"] += (
                f" [lifecycle action of {lifecycle['instanceId']} completed with ABANDON: "
                "the Auto Scaling group replaces the instance]"
                if result == "ABANDON"
                else f" [lifecycle action of {lifecycle['instanceId']} completed with CONTINUE: "
                "it holds the mounted array]"
            )
    return out


def complete_lifecycle_action(lifecycle: dict[str, str], result: str) -> None:
    try:
        clients.autoscaling().complete_lifecycle_action(
            LifecycleHookName=lifecycle["lifecycleHookName"],
            AutoScalingGroupName=lifecycle["autoScalingGroupName"],
            LifecycleActionToken=lifecycle["lifecycleActionToken"],
            LifecycleActionResult=result,
        )
    except ClientError as err:
        # A retried step, or the heartbeat ran out: the action is no longer open.
        if error_code(err) == "ValidationError" and "No active Lifecycle Action" in str(err):
            logger.warning("lifecycle action already completed", extra=lifecycle)
            return
        raise


def child_failure(error: dict[str, Any]) -> tuple[str, str]:
    """The named error and cause of a failed step. A nested restore that failed reaches us as
    ``States.TaskFailed`` whose cause is the child's DescribeExecution answer (JSON) carrying
    the restore's own error and cause; a failed Lambda step's cause is its error JSON."""
    name, cause = _failure(error)
    # A Fail state may not name a States.* error; say which one it was instead.
    if name.startswith("States."):
        return "RestoreFailed", f"{name}: {cause}"
    return name, cause


def _failure(error: dict[str, Any]) -> tuple[str, str]:
    name = str(error.get("Error", "States.Runtime"))
    raw = str(error.get("Cause", ""))
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        return public_name(name), raw
    if isinstance(parsed, dict):
        lowered = {str(k).lower(): v for k, v in parsed.items()}
        if "errormessage" in lowered:
            kind = str(lowered.get("errortype") or name)
            return public_name(kind), str(lowered["errormessage"])
        status = str(lowered.get("status", ""))
        if status in ("ABORTED", "TIMED_OUT") and not lowered.get("error"):
            child = str(lowered.get("executionarn", ""))
            word = "stopped" if status == "ABORTED" else "timed out"
            return (
                "RestoreAborted" if status == "ABORTED" else "RestoreTimedOut",
                f"the restore {child} was {word} before it finished",
            )
        if lowered.get("error") or lowered.get("cause"):
            child = str(lowered.get("executionarn", ""))
            where = f" (restore {child})" if child else ""
            return public_name(str(lowered.get("error") or name)), str(
                lowered.get("cause") or ""
            ) + where
    return public_name(name), raw
