"""Which of the three events (workflows/recovery/__init__.py) an EventBridge event is, which
array it concerns, and what it asks for: a Trigger (restore how, onto which instance, under
which execution name) or a Skip (and why). An event that is not ours is None."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pydantic import ValidationError

from raidsnap import tags
from raidsnap.aws.instances import instance_facts
from raidsnap.environment import RecoverySettings
from raidsnap.models import RestoreMode
from raidsnap.observability import logger
from raidsnap.workflows.recovery.contracts import (
    AlarmDetail,
    AlarmState,
    BusEvent,
    InstanceStateDetail,
    LaunchDetail,
    Lifecycle,
    RestoreRequest,
    TriggerKind,
)

ALARM = ("aws.cloudwatch", "CloudWatch Alarm State Change")
STATE_CHANGE = ("aws.ec2", "EC2 Instance State-change Notification")
LAUNCH = ("aws.autoscaling", "EC2 Instance-launch Lifecycle Action")
# Instance states that mean the array's instance is gone for good. A stopped instance keeps its
# volumes and comes back with them when started: that is no reason to restore elsewhere.
LOST_STATES = ("terminated",)

# Execution names of a state machine that logs may hold only 0-9, A-Z, a-z, - and _
# (StartExecution API reference, name); an array name may also hold ".".
_NAME_SAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class Trigger:
    """What an event asks for: which array, restored how, and which execution name."""

    kind: TriggerKind
    array: str
    key: str
    restore: RestoreRequest
    lifecycle: Lifecycle | None = None
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

    kind: TriggerKind
    array: str
    reason: str


def classify(event: BusEvent, settings: RecoverySettings) -> Trigger | Skip | None:
    kind = (event.source, event.detail_type)
    detail = event.detail or {}
    try:
        if kind == ALARM:
            return _from_alarm(event, AlarmDetail.model_validate(detail), settings)
        if kind == STATE_CHANGE:
            return _from_state_change(event, InstanceStateDetail.model_validate(detail), settings)
        if kind == LAUNCH:
            return _from_launch(LaunchDetail.model_validate(detail), settings)
    except ValidationError as err:
        # Not an event of the shape AWS documents: not ours to act on (EventBridge would only
        # deliver it again if this raised).
        logger.warning("ignored malformed event", extra={"problem": str(err)})
        return None
    logger.warning("ignored event", extra={"source": kind[0], "detailType": kind[1]})
    return None


def _restore_input(
    array: str, config: dict[str, str], mode: RestoreMode, target: str
) -> RestoreRequest:
    """The restore's input: the array's latest set onto ``target`` in ``mode`` (DESIGN.md)."""
    request = RestoreRequest(array=array, setId="latest", mode=mode, targetInstanceId=target)
    if config.get("initialization"):
        request = request.model_copy(update={"initialization": config["initialization"]})
    if config.get("mountPoint"):
        request = request.model_copy(update={"mountPoint": config["mountPoint"]})
    return request


def _array_of_instance(
    instance_id: str, settings: RecoverySettings, alarm_name: str = ""
) -> tuple[str, dict[str, str]]:
    """The array whose configured instance (or replacement) this is, else the array the instance
    is tagged with: after a move the alarm watches an instance the config may not name (an
    array without recovery config still recovers in place). Where one instance holds several
    configured arrays, the array whose alarm fired (each has its own alarm on the instance)."""
    here = [
        (array, config)
        for array, config in settings.by_array.items()
        if instance_id in (config.get("instanceId"), config.get("replacementInstanceId"))
    ]
    by_alarm = [(a, c) for a, c in here if settings.alarm_by_array.get(a) == alarm_name]
    if alarm_name and len(by_alarm) == 1:
        return by_alarm[0]
    if here:
        return here[0]
    tagged = instance_facts(instance_id)[1].get(tags.ARRAY, "")
    return tagged, settings.by_array.get(tagged, {})


def _holder(array: str, config: dict[str, str], besides: str) -> str | None:
    """The other configured instance of the array (instance or replacement) if it carries the
    array's tag: the array was moved there."""
    for candidate in (config.get("instanceId"), config.get("replacementInstanceId")):
        if candidate and candidate != besides:
            state, found = instance_facts(candidate)
            if state not in ("terminated", "unknown") and tags.holds(found, array):
                return candidate
    return None


def _from_alarm(
    event: BusEvent, detail: AlarmDetail, settings: RecoverySettings
) -> Trigger | Skip | None:
    state = detail.state or AlarmState()
    if state.value != "ALARM":
        return None
    instance_id = detail.instance_id()
    if not instance_id:
        logger.warning("alarm without an InstanceId dimension", extra={"alarm": detail.dump()})
        return None
    alarm_arn = (event.resources or [detail.alarmName or ""])[0]
    array, config = _array_of_instance(instance_id, settings, alarm_arn.rsplit(":", 1)[-1])
    if not array:
        logger.warning("alarm for an instance of no array", extra={"instance": instance_id})
        return None
    if not tags.holds(instance_facts(instance_id)[1], array):
        moved_to = _holder(array, config, instance_id)
        if moved_to:
            return Skip(
                "alarm",
                array,
                f"the attached EBS alarm of {instance_id} fired, but {array} is no longer on it: "
                f"a recovery moved it to {moved_to}",
            )
    key = f"{alarm_arn}|{state.timestamp or event.time}"
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
        restore = _restore_input(array, config, "attach", replacement)
        note = f"attached EBS of {instance_id} failed; restoring onto {replacement}"
        return Trigger(
            "alarm", array, key, restore, notes=[note], retire=instance_id, alarmed=instance_id
        )
    # In replace mode, and wherever the array lives once a recovery has moved it (the
    # configured replacement holds it already): the array is replaced where it is.
    restore = _restore_input(array, config, "replace", instance_id)
    note = f"attached EBS of {instance_id} failed; replacing the array in place"
    return Trigger("alarm", array, key, restore, notes=[note], alarmed=instance_id)


def _from_state_change(
    event: BusEvent, detail: InstanceStateDetail, settings: RecoverySettings
) -> Trigger | Skip | None:
    instance_id = detail.instance_id
    state = detail.state
    if state not in LOST_STATES:
        return None
    for array, config in settings.by_array.items():
        configured, replacement = config.get("instanceId"), config.get("replacementInstanceId")
        if instance_id not in (configured, replacement):
            continue
        # A terminated instance stays visible, tags included, for a while after it ends.
        holds = tags.holds(instance_facts(instance_id)[1], array)
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
        key = f"{instance_id}|{state}|{event.time}"
        restore = _restore_input(array, config, "attach", replacement)
        note = f"{instance_id} is {state}; restoring onto the replacement {replacement}"
        return Trigger("lost", array, key, restore, notes=[note])
    return None


def _from_launch(detail: LaunchDetail, settings: RecoverySettings) -> Trigger | None:
    group = detail.AutoScalingGroupName
    instance_id = detail.EC2InstanceId
    token = detail.LifecycleActionToken
    if detail.LifecycleTransition != "autoscaling:EC2_INSTANCE_LAUNCHING":
        return None
    for array, config in settings.by_array.items():
        if config.get("autoScalingGroup") != group or not (instance_id and token):
            continue
        restore = _restore_input(array, config, "attach", instance_id)
        lifecycle = Lifecycle(
            autoScalingGroupName=group,
            lifecycleHookName=detail.LifecycleHookName,
            lifecycleActionToken=token,
            instanceId=instance_id,
        )
        note = f"{instance_id} launched into {group}; restoring onto it"
        return Trigger("launch", array, token, restore, lifecycle, [note])
    return None


def event_time(raw: object) -> datetime:
    """An event's time (now, if it has none EventBridge would send)."""
    try:
        return datetime.fromisoformat(str(raw or "").replace("Z", "+00:00"))
    except ValueError:
        return datetime.now(UTC)
