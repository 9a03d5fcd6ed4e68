"""What each recovery step reads and writes: the recovery state machine's data, typed.

The state machine (statemachines/recovery.asl.json) keeps one object: ``input`` (what the
trigger started the run with), ``execution``, and one key per step's result (``assessment``,
``target``; ``usable``, the restore's report that its array is mounted; ``error`` when a step,
or the restore, failed; ``settled``, what became of the restore when no report of a mounted
array arrived). Every Lambda step gets that whole object as ``state`` and its result
goes to its own key (in RunRestore's branches, a key of the branch's own copy). Results are
written with the fields that were set, so the JSON the Choice states and the operators read
stays exactly as it was.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, JsonValue

from raidsnap.models import Contract, ExecutionRef, RestoreMode, StepError

# What started a recovery: the array instance's attached-EBS alarm, its loss, or a launch into
# the array's Auto Scaling group.
TriggerKind = Literal["alarm", "lost", "launch"]


class Lifecycle(Contract):
    """The launch lifecycle action a recovery holds open (EventBridge's Auto Scaling event)."""

    autoScalingGroupName: str
    lifecycleHookName: str
    lifecycleActionToken: str
    instanceId: str

    def as_dict(self) -> dict[str, str]:
        return {k: str(v) for k, v in self.model_dump().items()}


class RestoreRequest(Contract):
    """The restore execution's input (DESIGN.md, restore input); kept whole for StartExecution."""

    model_config = ConfigDict(extra="allow")

    array: str
    setId: str = "latest"
    mode: RestoreMode | None = None
    targetInstanceId: str | None = None
    initialization: str | None = None
    # The config's recovery.mountPoint; unset: the mount point the set recorded.
    mountPoint: str | None = None


class EventRef(Contract):
    id: str | None = None
    source: str | None = None
    detailType: str | None = None
    time: str | None = None
    resources: list[str] = Field(default_factory=list)


class RecoveryInput(Contract):
    """The execution input the trigger writes (workflows/recovery/start.py)."""

    array: str
    trigger: TriggerKind
    event: EventRef = Field(default_factory=EventRef)
    restore: RestoreRequest
    lifecycle: Lifecycle | None = None
    retire: str | None = None
    alarmedInstanceId: str | None = None
    notes: list[str] = Field(default_factory=list)


class FailedMember(Contract):
    volumeId: str
    device: str | None = None
    slot: int | None = None
    listed: bool = True


class Degraded(Contract):
    """A redundant array md still serves (or may: the instance could not be asked) while
    members failed: replaced member by member with md, never rolled back by a recovery."""

    device: str | None = None
    level: str | None = None
    seen: bool = True
    failed: list[FailedMember] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)


class Look(Contract):
    """Assess's result: evidence that a member is impaired, gathered over one or more looks."""

    status: Literal["pending", "act", "none"] | None = None
    evidence: list[str] = Field(default_factory=list)
    # The array the evidence is about: an instance may hold several, and every line names it.
    array: str | None = None
    instanceId: str | None = None
    checked: list[str] | None = None
    mdUuid: str | None = None
    mdLevel: str | None = None
    degraded: Degraded | None = None
    discovery: str | None = None
    commandId: str | None = None
    waitSeconds: int | None = None
    budgetSeconds: int | None = None

    def decided(self, **update: object) -> Look:
        """The look done: act on any evidence; without evidence, replace nothing. A redundant
        array md serves degraded is not replaced either (``degraded``)."""
        done = self.model_copy(update=update)
        act = bool(done.evidence) and done.degraded is None
        return done.model_copy(update={"status": "act" if act else "none"})


class TargetWait(Contract):
    """CheckTarget's result: is the restore's target up with its SSM agent online?"""

    status: Literal["ready", "waiting"] | None = None
    budgetSeconds: int
    waitSeconds: int
    instanceId: str | None = None
    retired: str | None = None


class Started(Contract):
    """StartRestore's answer (the state machine waits for the restore's report instead)."""

    executionArn: str
    started: bool


class KeepAlive(Contract):
    """KeepLaunchAlive's result: the launch's lifecycle action still open (with the wait before
    the next heartbeat), or no longer (completed, or past its global timeout); or ``unanswered``:
    the restore mounted its array or ended, and what it said did not reach this run."""

    status: Literal["open", "closed", "unanswered"]
    waitSeconds: int


class Settled(Contract):
    """Settle's result, once RunRestore ended without the report of a mounted array: the
    restore still ``running`` (look again after waitSeconds), its array ``mounted`` (with its
    report), or ``ended`` without one (its status, error and cause, when known)."""

    status: Literal["running", "mounted", "ended"]
    waitSeconds: int | None = None
    restoreStatus: str | None = None
    error: str | None = None
    cause: str | None = None
    report: dict[str, JsonValue] | None = None


class RecoveryState(Contract):
    """The run's object as every step receives it. ``usable`` is the restore's report that its
    array is mounted (the RunRestore Catch for RestoreUsable writes it: ``Cause`` is the report
    as JSON); ``error`` is where a failed step, or the restore's failure, is written."""

    input: RecoveryInput
    execution: ExecutionRef = Field(default_factory=ExecutionRef)
    assessment: Look | None = None
    target: TargetWait | None = None
    usable: StepError | None = None
    error: StepError | None = None
    settled: Settled | None = None


class StepCall(Contract):
    """What the state machine sends the recovery step function: which step, and the run (and,
    to start the restore, the token of the Task that waits on it)."""

    step: Literal[
        "assess", "target", "restore", "heartbeat", "settle", "none", "succeeded", "failed"
    ]
    state: RecoveryState
    taskToken: str | None = None


class SetRef(Contract):
    setId: str | None = None
    takenAt: str | None = None
    ageMinutes: float | None = None


class Report(Contract):
    """The run's output: what the recovery did, from which set, and what that means. After a
    restore, ``restore`` is what the restore reported once the array was mounted (its prewarm,
    if any, still running in ``restoreExecutionArn``)."""

    array: str
    trigger: str
    action: Literal["restored", "none", "degraded"]
    message: str
    set: SetRef | None = None
    evidence: list[str] | None = None
    checked: list[str] | None = None
    discovery: str | None = None
    degraded: Degraded | None = None
    restoreExecutionArn: str | None = None
    restore: dict[str, JsonValue] | None = None
    lifecycleAction: str | None = None
    protection: dict[str, JsonValue] | None = None
    notification: str | None = None
    # What this run cost (raidsnap.aws.costs); its restore's is in the restore's output.
    cost: dict[str, JsonValue] | None = None


class Finished(Contract):
    output: Report


class Failure(Contract):
    """The Failure step's result: the Fail state's named error and cause."""

    error: str
    cause: str
    lifecycleAction: str | None = None


# ---------------------------------------------------------------------- EventBridge events
# The three events that start a recovery, as EventBridge delivers them (Amazon EventBridge
# User Guide, event structure; CloudWatch "Alarm events and EventBridge"; EC2 "EC2 Instance
# State-change Notification"; Amazon EC2 Auto Scaling "EC2 Instance-launch Lifecycle Action").
# Only the fields a recovery reads; every one optional, since an event that is not ours must be
# ignored, not refused.


class BusEvent(Contract):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    id: str | None = None
    source: str | None = None
    detail_type: str | None = Field(default=None, alias="detail-type")
    time: str | None = None
    resources: list[str] | None = None
    detail: dict[str, JsonValue] | None = None


class Metric(Contract):
    dimensions: dict[str, str] | None = None


class MetricStat(Contract):
    metric: Metric | None = None


class AlarmMetric(Contract):
    metricStat: MetricStat | None = None


class AlarmConfiguration(Contract):
    metrics: list[AlarmMetric] | None = None


class AlarmState(Contract):
    value: str | None = None
    timestamp: str | None = None


class AlarmDetail(Contract):
    alarmName: str | None = None
    state: AlarmState | None = None
    configuration: AlarmConfiguration | None = None

    def instance_id(self) -> str:
        """The InstanceId dimension of the alarm's metric ("" when it has none)."""
        for metric in (self.configuration.metrics if self.configuration else None) or []:
            stat = metric.metricStat
            dims = (stat.metric.dimensions if stat and stat.metric else None) or {}
            if dims.get("InstanceId"):
                return dims["InstanceId"]
        return ""


class InstanceStateDetail(Contract):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    instance_id: str = Field(default="", alias="instance-id")
    state: str = ""


class LaunchDetail(Contract):
    AutoScalingGroupName: str = ""
    EC2InstanceId: str = ""
    LifecycleActionToken: str = ""
    LifecycleHookName: str = ""
    LifecycleTransition: str = "autoscaling:EC2_INSTANCE_LAUNCHING"


class StartAnswer(Contract):
    """What the trigger answers EventBridge (and the logs): started, or why not."""

    started: bool
    reason: str | None = None
    array: str | None = None
    name: str | None = None
    executionArn: str | None = None
