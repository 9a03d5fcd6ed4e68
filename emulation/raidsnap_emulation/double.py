"""A test double that makes moto answer like EC2 and SSM do where moto does not.

The double wraps ``botocore.client.BaseClient._make_api_call``, so it sees every boto3 call made
in this process: the Lambda handlers' calls and the Step Functions executor's aws-sdk
integrations, from any thread. Per (service, operation) it passes the call through to moto,
rewrites moto's answer, or answers itself. Time is the shared ``VirtualClock``: snapshot
progress, volume creation, FSR optimisation and command durations are all derived from it, and
nothing here sleeps.

Where moto keeps the state (volumes, snapshots, instances, tags, documents) the double leaves it
there and keeps only what moto lacks: start times, failure marks, client tokens, FSR pairs,
commands.

A call made on behalf of a known principal (a function inside ``acting_as``, a state machine's
integration through a client tagged with ``ACTOR_ATTRIBUTE``) is first passed to ``authorize``,
when set: the one place where the emulation's IAM (raidsnap_emulation.iam) sees every call.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import os
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import boto3
import yaml  # type: ignore[import-untyped]
from botocore.client import BaseClient
from botocore.exceptions import ClientError

from raidsnap_emulation.clock import VirtualClock
from raidsnap_emulation.ssm_agent import (
    CURRENT_AGENT_VERSION,
    InvalidParametersError,
    RenderedStep,
    UnsupportedDocumentError,
    execution_timeout,
    render,
    validate_parameters,
)

Params = dict[str, Any]
Answer = dict[str, Any]
CommandStatus = Literal["Success", "Failed", "TimedOut", "Cancelled"]

SNAPSHOT_PER_VOLUME_INTERVAL_SECONDS = 15.0
"""EC2 refuses a second snapshot of one volume started within this many seconds."""

# GetCommandInvocation returns the first 24,000 characters of stdout and the first 8,000 of
# stderr (SSM API reference, GetCommandInvocation StandardOutputContent/StandardErrorContent).
# The agent keeps a prefix and ends it with a marker (agent/plugins/pluginutil StringPrefix,
# suffix "--output truncated--" from agent/framework/processor/executer/iohandler), counting
# bytes as Go does.
STDOUT_LIMIT = 24000
STDERR_LIMIT = 8000
PLUGIN_OUTPUT_LIMIT = 2500
TRUNCATED_SUFFIX = "--output truncated--"

_MUTATING_PREFIXES = (
    "Create",
    "Delete",
    "Attach",
    "Detach",
    "Enable",
    "Disable",
    "Modify",
    "Send",
    "Cancel",
    "Run",
    "Start",
    "Stop",
    "Terminate",
    "Reboot",
    "Put",
    "Update",
    "Register",
    "Deregister",
    "Associate",
    "Disassociate",
    "Copy",
    "Restore",
    "Import",
    "Reset",
    "Replace",
    "Lock",
    "Unlock",
    "Add",
    "Remove",
)

_SERVER_STATUS = {
    "RequestLimitExceeded": 503,
    "ServiceUnavailable": 503,
    "Unavailable": 503,
    "InternalError": 500,
    "InternalFailure": 500,
    "InternalServerError": 500,
}


@dataclass(frozen=True)
class Call:
    """One API call the double saw. ``applied`` is true when AWS carried it out, which includes a
    call that was made to fail after it took effect."""

    service: str
    operation: str
    params: dict[str, Any]
    error_code: str | None
    time: datetime
    applied: bool = True
    # The function (by logical id) on whose behalf the call was made, when the harness knows.
    actor: str | None = None


@dataclass(frozen=True)
class CommandContext:
    """What one instance's agent was asked to run. ``parameters`` is the SendCommand call's;
    ``environment`` is what the script sees of them: the SSM_<Name> variables the agent exports
    (raidsnap_emulation.ssm_agent), none for a parameter not declared ENV_VAR or on an agent too
    old to export them. ``script`` is the _script.sh the agent wrote ("" for a document the
    renderer does not model, such as AWS-owned ones moto does not carry)."""

    instance_id: str
    document_name: str
    parameters: dict[str, list[str]]
    command_id: str
    now: datetime
    environment: dict[str, str] = field(default_factory=dict)
    script: str = ""


@dataclass(frozen=True)
class CommandOutcome:
    status: CommandStatus = "Success"
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    duration_seconds: float = 0.0
    # The agent stopped reporting (hung or gone): nothing enforces the step's timeoutSeconds,
    # the invocation stays InProgress for duration_seconds and only CancelCommand ends it.
    unresponsive: bool = False


Responder = Callable[[CommandContext], CommandOutcome]


class AwsError(Exception):
    """An error the double answers with; the dispatcher turns it into the client's ClientError."""

    def __init__(self, code: str, message: str, status: int | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status if status is not None else _SERVER_STATUS.get(code, 400)


@dataclass
class _Fault:
    code: str
    message: str
    remaining: int
    after_success: bool


@dataclass
class _Snapshot:
    snapshot_id: str
    volume_id: str
    start: datetime
    fails: bool = False
    kms_key_id: str | None = None


@dataclass
class _Volume:
    volume_id: str
    created: datetime
    snapshot_id: str | None
    fails: bool
    initialization_rate: int | None
    fast_restored: bool
    kms_key_id: str | None


@dataclass
class _Attachment:
    volume_id: str
    instance_id: str
    device: str
    since: datetime
    detaching: bool = False


@dataclass
class _FsrPair:
    snapshot_id: str
    zone: str
    owner_id: str
    enabling: datetime
    optimizing: datetime
    enabled: datetime
    disabling: datetime | None = None
    disabled: datetime | None = None
    # The enable failed on EC2's side: disabling/disabled with this reason, not the user's.
    failure_reason: str | None = None
    # Volume creation credits: the balance as of credits_at (None: the bucket has not started).
    credits: float = 0.0
    credits_at: datetime | None = None


@dataclass
class _Invocation:
    instance_id: str
    outcome: CommandOutcome
    start: datetime
    end: datetime
    cancelled_at: datetime | None = None


@dataclass
class _Command:
    command_id: str
    document_name: str
    parameters: dict[str, list[str]]
    comment: str
    requested: datetime
    timeout_seconds: int
    plugin_name: str
    invocations: dict[str, _Invocation] = field(default_factory=dict)


@dataclass
class _VolumeStatus:
    """One volume's status checks, as DescribeVolumeStatus reports them."""

    status: str = "ok"  # ok | impaired | warning | insufficient-data
    io_enabled: str = "passed"  # passed | failed
    io_performance: str = "not-applicable"  # normal | degraded | severely-degraded | stalled
    events: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _LifecycleAction:
    """A launch lifecycle action of an Auto Scaling group, waiting in Pending:Wait."""

    group: str
    hook: str
    token: str
    instance_id: str
    heartbeat_timeout: float
    default_result: str
    started: datetime
    deadline: datetime
    global_deadline: datetime
    result: str | None = None
    heartbeats: list[datetime] = field(default_factory=list)


_FSR_ORDER = {"enabling": 0, "optimizing": 1, "enabled": 2}
# Most SourceSnapshotIds one Enable/DisableFastSnapshotRestores call takes (see _fsr_targets).
FSR_MAX_SNAPSHOT_IDS = 10
# Service Quotas' EBS quota "Fast snapshot restore" (ebs / L-631ECBD3, default 5 per Region).
FSR_QUOTA_SERVICE_CODE = "ebs"
FSR_QUOTA_CODE = "L-631ECBD3"
FSR_QUOTA_ERROR = "ResourceLimitExceeded"
# StateTransitionReason of a pair whose enable failed (see fail_fsr_async).
FSR_FAILED_REASON = "Server.InternalError"


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def _truncate(text: str, limit: int) -> str:
    """The agent's StringPrefix: under the limit (in bytes) the text is whole; otherwise its
    first limit bytes, the last of them given to the truncation marker."""
    data = text.encode()
    if len(data) < limit:
        return text
    keep = data[: limit - len(TRUNCATED_SUFFIX)]
    return keep.decode(errors="ignore") + TRUNCATED_SUFFIX


def _page(items: list[Any], params: Params, default_size: int = 1000) -> tuple[list[Any], str]:
    """Slice one page the way AWS does: an opaque NextToken, empty when there is no more."""
    start = int(params.get("NextToken") or 0)
    size = int(params.get("MaxResults") or default_size)
    end = start + size
    return items[start:end], (str(end) if end < len(items) else "")


def _split_filters(params: Params, names: set[str]) -> tuple[Params, list[dict[str, Any]]]:
    """Take the filters the double evaluates itself out of params meant for moto."""
    rest = copy.deepcopy(params)
    ours = [f for f in rest.get("Filters", []) if f.get("Name") in names]
    kept = [f for f in rest.get("Filters", []) if f.get("Name") not in names]
    if kept:
        rest["Filters"] = kept
    else:
        rest.pop("Filters", None)
    for key in ("MaxResults", "NextToken"):
        rest.pop(key, None)
    return rest, ours


def _matches(filters: list[dict[str, Any]], values: Callable[[str], list[str]]) -> bool:
    return all(set(values(f["Name"])) & set(f.get("Values", [])) for f in filters)


def _constant(values: list[str]) -> Callable[[str], list[str]]:
    return lambda _name: values


def _lookup(fields: dict[str, list[str]]) -> Callable[[str], list[str]]:
    return lambda name: fields.get(name, [])


class _Actor(threading.local):
    name: str | None = None


_actor = _Actor()

ACTOR_ATTRIBUTE = "_raidsnap_actor"
"""Set on a client whose calls a known principal makes (a state machine's integrations)."""

Authorize = Callable[[str, str, dict[str, Any], str], None]
"""(service, operation, params, actor): raises AwsError when IAM would deny the call."""


@contextlib.contextmanager
def acting_as(name: str) -> Iterator[None]:
    """Attribute the calls this thread makes inside the block to ``name``."""
    previous, _actor.name = _actor.name, name
    try:
        yield
    finally:
        _actor.name = previous


class AwsDouble:
    """EC2 and SSM as they behave, on top of moto, on a virtual clock."""

    _installed: AwsDouble | None = None
    _install_guard = threading.Lock()

    def __init__(self, clock: VirtualClock, region: str = "us-east-1") -> None:
        self.clock = clock
        self.region = region
        self.calls: list[Call] = []

        self.snapshot_seconds: float = 180.0
        self.volume_seconds: float = 10.0
        self.attach_seconds: float = 3.0
        self.detach_seconds: float = 5.0
        self.fsr_enabling_seconds: float = 60.0
        self.fsr_optimizing_seconds_per_gib: float = 3600.0 / 1024.0
        self.fsr_disabling_seconds: float = 30.0
        # Snapshots that may have FSR on at once in the Region (any AZ): the account's applied
        # value of the quota, which GetServiceQuota reports. See _enable_fsr.
        self.fsr_region_limit: int = 5
        self.invocation_visible_after_seconds: float = 0.0

        # IAM: the emulation authorizes each call a known principal makes, in this one place.
        self.authorize: Authorize | None = None

        self._lock = threading.RLock()
        self._depth = 0
        self._original: Callable[[BaseClient, str, Params], Answer] | None = None
        self._clients: dict[str, BaseClient] = {}
        self._routes: dict[tuple[str, str], Callable[[Params], Answer]] = {}
        self._logged_machines: set[str] = set()
        # Eventual consistency: resource id -> calls that still do not see it.
        self._consistency_lag = 0
        self._lagging: dict[str, int] = {}
        self._faults: dict[tuple[str, str], list[_Fault]] = {}
        self._throttle_all: dict[str, tuple[int, str]] = {}
        self._throttle_all_left: dict[tuple[str, str], int] = {}

        self._snapshots: dict[str, _Snapshot] = {}
        self._last_snapshot_start: dict[str, datetime] = {}
        self._failing_snapshot_volumes: set[str] = set()
        self._volumes: dict[str, _Volume] = {}
        self._failing_volume_snapshots: set[str] = set()
        self._client_tokens: dict[str, tuple[str, Answer]] = {}
        self._attachments: dict[str, _Attachment] = {}
        self._fsr: dict[tuple[str, str], _FsrPair] = {}
        # Every enablement ever made, for what FSR cost (a pair enabled again is a new one).
        self._fsr_history: list[_FsrPair] = []
        # Snapshot -> the image (AMI) whose block device mapping uses it.
        self._image_snapshots: dict[str, str] = {}
        self._fsr_stuck: str | None = None
        # Snapshot -> seconds after enabling at which its enable fails (fail_fsr_async).
        self._fsr_failing: dict[str, float] = {}
        self._zones: dict[str, str] | None = None

        self._volume_statuses: dict[str, _VolumeStatus] = {}
        self._lifecycle_actions: dict[str, _LifecycleAction] = {}

        self._agents: dict[str, bool] = {}
        self._agent_versions: dict[str, str] = {}
        self._responders: dict[str, Responder] = {}
        self._commands: dict[str, _Command] = {}

        self._handlers: dict[tuple[str, str], Callable[[Params], Answer]] = {
            ("ec2", "CreateSnapshot"): self._create_snapshot,
            ("ec2", "CreateSnapshots"): self._create_snapshots,
            ("ec2", "DescribeSnapshots"): self._describe_snapshots,
            ("ec2", "DeleteSnapshot"): self._delete_snapshot,
            ("ec2", "RegisterImage"): self._register_image,
            ("ec2", "DeregisterImage"): self._deregister_image,
            ("ec2", "CreateVolume"): self._create_volume,
            ("ec2", "DescribeVolumes"): self._describe_volumes,
            ("ec2", "AttachVolume"): self._attach_volume,
            ("ec2", "DetachVolume"): self._detach_volume,
            ("ec2", "DeleteVolume"): self._delete_volume,
            ("ec2", "DeleteTags"): self._delete_tags,
            ("ec2", "EnableFastSnapshotRestores"): self._enable_fsr,
            ("ec2", "DisableFastSnapshotRestores"): self._disable_fsr,
            ("ec2", "DescribeFastSnapshotRestores"): self._describe_fsr,
            ("ssm", "SendCommand"): self._send_command,
            ("ssm", "GetCommandInvocation"): self._get_command_invocation,
            ("ssm", "ListCommandInvocations"): self._list_command_invocations,
            ("ssm", "ListCommands"): self._list_commands,
            ("ssm", "CancelCommand"): self._cancel_command,
            ("ssm", "DescribeInstanceInformation"): self._describe_instance_information,
            ("cloudformation", "ListStackResources"): self._list_stack_resources,
            ("ec2", "DescribeVolumeStatus"): self._describe_volume_status,
            ("autoscaling", "RecordLifecycleActionHeartbeat"): self._lifecycle_heartbeat,
            ("autoscaling", "CompleteLifecycleAction"): self._complete_lifecycle_action,
            ("service-quotas", "GetServiceQuota"): self._get_service_quota,
        }

    # ------------------------------------------------------------------ installation

    @contextlib.contextmanager
    def install(self) -> Iterator[AwsDouble]:
        """Patch botocore for the duration of the block; nested blocks of one double are fine."""
        with AwsDouble._install_guard:
            if AwsDouble._installed is not None and AwsDouble._installed is not self:
                raise RuntimeError("another AwsDouble is already installed")
            if self._depth == 0:
                self._original = getattr(BaseClient, "_make_api_call")  # noqa: B009
                double = self

                def _make_api_call(client: BaseClient, operation: str, params: Params) -> Answer:
                    return double._dispatch(client, operation, params)

                setattr(BaseClient, "_make_api_call", _make_api_call)  # noqa: B010
                AwsDouble._installed = self
            self._depth += 1
        try:
            yield self
        finally:
            with AwsDouble._install_guard:
                self._depth -= 1
                if self._depth == 0:
                    setattr(BaseClient, "_make_api_call", self._original)  # noqa: B010
                    self._original = None
                    self._clients.clear()
                    AwsDouble._installed = None

    # ------------------------------------------------------------------ configuration

    def eventually_consistent(self, calls: int = 2) -> None:
        """From now on, each snapshot or volume a create returns stays unseen by the next
        ``calls`` calls that name it or list its kind: CreateTags and a Describe by id answer
        InvalidSnapshot.NotFound / InvalidVolume.NotFound, a Describe by filter leaves it out.
        EC2 does this sometimes right after a create ("Eventual consistency in the Amazon EC2
        API", EC2 Developer Guide); 0 turns it off."""
        with self._lock:
            self._consistency_lag = calls

    def set_logged(self, state_machine_arn: str, logged: bool = True) -> None:
        """Whether the state machine has logging enabled: its execution names are then held to
        the narrower character set (StartExecution ``name``)."""
        with self._lock:
            if logged:
                self._logged_machines.add(state_machine_arn)
            else:
                self._logged_machines.discard(state_machine_arn)

    def route(self, service: str, operation: str, fn: Callable[[Params], Answer]) -> None:
        with self._lock:
            self._routes[(service, operation)] = fn

    def fail_snapshots(self, volume_id: str) -> None:
        """Snapshots of this volume, those still pending and those to come, end in error."""
        with self._lock:
            self._failing_snapshot_volumes.add(volume_id)
            now = self.clock.now()
            for snap in self._snapshots.values():
                if snap.volume_id == volume_id and self._snapshot_state(snap, now)[0] == "pending":
                    snap.fails = True

    def heal_snapshots(self, volume_id: str) -> None:
        """Snapshots of this volume taken from now on succeed again."""
        with self._lock:
            self._failing_snapshot_volumes.discard(volume_id)

    def fail_volumes(self, snapshot_id: str) -> None:
        """Volumes created from this snapshot from now on end in error."""
        with self._lock:
            self._failing_volume_snapshots.add(snapshot_id)

    def heal_volumes(self, snapshot_id: str) -> None:
        """Volumes created from this snapshot from now on become available again."""
        with self._lock:
            self._failing_volume_snapshots.discard(snapshot_id)

    def stick_fsr(self, state: str = "enabling") -> None:
        if state not in (*_FSR_ORDER, "disabling"):
            raise ValueError(f"FSR cannot stick in state {state!r}")
        with self._lock:
            self._fsr_stuck = state

    def impair_volume(
        self,
        volume_id: str,
        status: str = "impaired",
        *,
        io_enabled: str = "failed",
        io_performance: str = "not-applicable",
        event: str | None = "potential-data-inconsistency",
    ) -> None:
        """The volume's status checks report a problem (DescribeVolumeStatus): by default what
        EC2 reports when an issue on the volume's host disabled its I/O."""
        with self._lock:
            events = []
            if event is not None:
                events.append(
                    {
                        "EventId": f"evol-{uuid.uuid4().hex[:17]}",
                        "EventType": event,
                        "Description": "THIS IS AN AUTOMATED EVENT. NO ACTION IS REQUIRED.",
                        "NotBefore": self.clock.now(),
                    }
                )
            self._volume_statuses[volume_id] = _VolumeStatus(
                status, io_enabled, io_performance, events
            )

    def lifecycle_action(
        self,
        group: str,
        hook: str,
        token: str,
        instance_id: str,
        *,
        heartbeat_timeout: float = 3600.0,
        default_result: str = "ABANDON",
    ) -> None:
        """An instance launched into ``group`` waits in Pending:Wait on ``hook`` from now on."""
        now = self.clock.now()
        global_timeout = min(172800.0, 100 * heartbeat_timeout)
        with self._lock:
            self._lifecycle_actions[token] = _LifecycleAction(
                group,
                hook,
                token,
                instance_id,
                heartbeat_timeout,
                default_result,
                now,
                now + timedelta(seconds=heartbeat_timeout),
                now + timedelta(seconds=global_timeout),
            )

    def lifecycle_result(self, token: str) -> tuple[str | None, list[datetime]]:
        """(result, heartbeats) of a lifecycle action: CONTINUE or ABANDON as completed, the
        default result once it timed out, None while it waits."""
        with self._lock:
            action = self._lifecycle_actions[token]
            self._expire(action, self.clock.now())
            return action.result, list(action.heartbeats)

    def fail_fsr_async(self, snapshot_id: str, after_seconds: float = 30.0) -> None:
        """The enable of this snapshot's FSR (in any AZ; pairs enabling now and those enabled
        from now on) fails on EC2's side ``after_seconds`` after it was accepted: the pair goes
        ``disabling``, then ``disabled``, with a StateTransitionReason that is not the user's.

        EC2 documents the failure ("disabling: A request was made to disable fast snapshot
        restore, or a request to enable fast snapshot restore failed", EBS User Guide, "Check
        the fast snapshot restore state") but lists only the two Client.UserInitiated reasons
        (API reference, DescribeFastSnapshotRestoreSuccessItem); the double reports
        FSR_FAILED_REASON, EC2's form of a server-side reason, which nothing relies on."""
        with self._lock:
            self._fsr_failing[snapshot_id] = after_seconds
            now = self.clock.now()
            for pair in self._fsr.values():
                pending = self._fsr_state(pair, now) in ("enabling", "optimizing")
                if pair.snapshot_id == snapshot_id and pending and pair.disabling is None:
                    self._fail_pair(pair, after_seconds)

    def _fail_pair(self, pair: _FsrPair, after_seconds: float) -> None:
        pair.disabling = pair.enabling + timedelta(seconds=after_seconds)
        pair.disabled = pair.disabling + timedelta(seconds=self.fsr_disabling_seconds)
        pair.failure_reason = FSR_FAILED_REASON

    def set_agent(self, instance_id: str, online: bool = True, version: str | None = None) -> None:
        """The instance's SSM agent: online or not, and the version it reports (the current
        release unless given)."""
        with self._lock:
            self._agents[instance_id] = online
            if version is not None:
                self._agent_versions[instance_id] = version

    def agent_version(self, instance_id: str) -> str:
        with self._lock:
            return self._agent_versions.get(instance_id, CURRENT_AGENT_VERSION)

    def on_command(self, document_name: str, responder: Responder) -> None:
        with self._lock:
            self._responders[document_name] = responder

    def throttle(
        self, service: str, operation: str, times: int = 1, code: str = "RequestLimitExceeded"
    ) -> None:
        message = "Request limit exceeded." if code == "RequestLimitExceeded" else "Rate exceeded"
        with self._lock:
            self._faults.setdefault((service, operation), []).append(
                _Fault(code, message, times, after_success=False)
            )

    def fail(  # noqa: PLR0917 - the positional order is the published API
        self,
        service: str,
        operation: str,
        times: int = 1,
        code: str = "InternalError",
        message: str = "",
        after_success: bool = False,
    ) -> None:
        text = message or "An internal error has occurred"
        with self._lock:
            self._faults.setdefault((service, operation), []).append(
                _Fault(code, text, times, after_success=after_success)
            )

    def throttle_everything(
        self, service: str = "ec2", times_each: int = 1, code: str | None = None
    ) -> None:
        default = "RequestLimitExceeded" if service == "ec2" else "ThrottlingException"
        with self._lock:
            self._throttle_all[service] = (times_each, code or default)

    # ------------------------------------------------------------------ inspection

    def mutating_calls(self, service: str = "ec2") -> list[Call]:
        """Calls of that service that changed something in AWS."""
        with self._lock:
            return [
                c
                for c in self.calls
                if c.service == service and c.applied and c.operation.startswith(_MUTATING_PREFIXES)
            ]

    def fsr_pair_hours(self) -> float:
        """Hours of FSR billed so far, summed over every enablement of every (snapshot, zone)
        pair: from enabling until it was disabled, or until now while still on (EBS pricing:
        per DSU-hour, billed per minute with a one-hour minimum, left to the reader)."""
        now = self.clock.now()
        with self._lock:
            return (
                sum(
                    ((min(p.disabling, now) if p.disabling else now) - p.enabling).total_seconds()
                    for p in self._fsr_history
                )
                / 3600
            )

    def fsr_active(self) -> list[tuple[str, str]]:
        """Pairs that are on (and billed) now."""
        now = self.clock.now()
        with self._lock:
            return sorted(
                key
                for key, pair in self._fsr.items()
                if self._fsr_state(pair, now) in ("enabling", "optimizing", "enabled")
            )

    # ------------------------------------------------------------------ dispatch

    def _dispatch(self, client: BaseClient, operation: str, params: Params) -> Answer:
        service: str = client.meta.service_model.service_name
        recorded = copy.copy(params)
        actor = _actor.name or getattr(client, ACTOR_ATTRIBUTE, None)
        if self.authorize is not None and actor is not None:
            try:
                with self._lock:
                    if service == "ec2":
                        self._settle_detachments()
                    self.authorize(service, operation, params, actor)
            except AwsError as err:
                self._record(service, operation, recorded, err.code, applied=False, actor=actor)
                raise self._client_error(client, operation, err) from None
        with self._lock:
            fault = self._take_fault(service, operation)
        if fault is not None and not fault.after_success:
            self._record(service, operation, recorded, fault.code, applied=False, actor=actor)
            raise self._client_error(client, operation, AwsError(fault.code, fault.message))
        try:
            answer = self._answer(client, service, operation, params)
        except AwsError as err:
            self._record(service, operation, recorded, err.code, applied=False, actor=actor)
            raise self._client_error(client, operation, err) from None
        except ClientError as err:
            self._record(service, operation, recorded, err.response["Error"]["Code"], False, actor)
            raise
        if fault is not None:
            self._record(service, operation, recorded, fault.code, applied=True, actor=actor)
            raise self._client_error(client, operation, AwsError(fault.code, fault.message))
        self._record(service, operation, recorded, None, applied=True, actor=actor)
        return answer

    def _answer(self, client: BaseClient, service: str, operation: str, params: Params) -> Answer:
        route = self._routes.get((service, operation))
        if route is not None:
            return route(params)
        if (service, operation) == ("stepfunctions", "GetExecutionHistory"):
            return self._execution_history(client, params)
        handler = self._handlers.get((service, operation))
        if (service, operation) == ("stepfunctions", "StartExecution"):
            self._check_execution_name(params)
        if handler is None and service not in ("ec2", "ssm"):
            return self._passthrough(client, operation, params)
        with self._lock:
            if service == "ec2":
                self._settle_detachments()
            if service == "ec2" and self._lagging:
                self._not_yet_visible(operation, params)
            if handler is not None:
                answer = handler(params)
                answer.setdefault(
                    "ResponseMetadata", {"RequestId": str(uuid.uuid4()), "HTTPStatusCode": 200}
                )
            else:
                answer = self._passthrough(client, operation, params)
            if service == "ec2":
                answer = self._lag(operation, answer)
            return answer

    def _lag(self, operation: str, answer: Answer) -> Answer:
        """Record what a create returned; hide lagging ids from a Describe by filter."""
        if operation in ("CreateSnapshot", "CreateVolume") and self._consistency_lag:
            key = "SnapshotId" if operation == "CreateSnapshot" else "VolumeId"
            self._lagging[str(answer[key])] = self._consistency_lag
        elif operation == "CreateSnapshots" and self._consistency_lag:
            for item in answer.get("Snapshots", []):
                self._lagging[str(item["SnapshotId"])] = self._consistency_lag
        elif operation in ("DescribeSnapshots", "DescribeVolumes") and self._lagging:
            listing, key = ("Snapshots", "SnapshotId")
            if operation == "DescribeVolumes":
                listing, key = ("Volumes", "VolumeId")
            kept = []
            for item in answer.get(listing, []):
                if self._lagging.get(str(item[key]), 0) > 0:
                    self._lagging[str(item[key])] -= 1
                    continue
                kept.append(item)
            answer = dict(answer, **{listing: kept})
        return answer

    def _not_yet_visible(self, operation: str, params: Params) -> None:
        """CreateTags, or a Describe by id, that names an id EC2 does not show yet."""
        named: list[str] = []
        if operation == "CreateTags":
            named = [str(r) for r in params.get("Resources", [])]
        elif operation == "DescribeSnapshots":
            named = [str(r) for r in params.get("SnapshotIds", [])]
        elif operation == "DescribeVolumes":
            named = [str(r) for r in params.get("VolumeIds", [])]
        for rid in named:
            if self._lagging.get(rid, 0) > 0:
                self._lagging[rid] -= 1
                kind = "InvalidSnapshot" if rid.startswith("snap-") else "InvalidVolume"
                noun = "snapshot" if kind == "InvalidSnapshot" else "volume"
                raise AwsError(f"{kind}.NotFound", f"The {noun} '{rid}' does not exist.")

    def _check_execution_name(self, params: Params) -> None:
        """StartExecution's name rules (Step Functions API reference, StartExecution ``name``):
        1 to 80 characters, none of whitespace, brackets, wildcards, special characters or
        control characters; and where the state machine has logging enabled, only 0-9, A-Z,
        a-z, - and _. Otherwise InvalidName, and nothing starts."""
        name = params.get("name")
        if name is None:
            return
        text = str(name)
        with self._lock:
            logged = params.get("stateMachineArn") in self._logged_machines
        forbidden = re.compile(r'[\s<>{}\[\]?*"#%\\^|~`$&,;:/\x00-\x1f\x7f-\x9f]')
        if not 1 <= len(text) <= 80 or forbidden.search(text):
            raise AwsError("InvalidName", f"Invalid Name: '{text}'")
        if logged and re.search(r"[^0-9A-Za-z_-]", text):
            raise AwsError(
                "InvalidName",
                f"Invalid Name: '{text}' (with logging enabled, names may contain only 0-9, "
                "A-Z, a-z, - and _)",
            )

    def _execution_history(self, client: BaseClient, params: Params) -> Answer:
        """moto 5.2.5's backend ignores reverseOrder and maxResults; AWS lists the newest events
        first with reverseOrder and returns at most maxResults (default 100, at most 1000) per page
        (https://docs.aws.amazon.com/step-functions/latest/apireference/API_GetExecutionHistory.html),
        with a nextToken while more follow."""
        paging = ("reverseOrder", "maxResults", "nextToken")
        forward = {k: v for k, v in params.items() if k not in paging}
        answer = self._passthrough(client, "GetExecutionHistory", forward)
        events = list(answer.get("events") or [])
        events.sort(key=lambda e: int(e.get("id") or 0), reverse=bool(params.get("reverseOrder")))
        start = int(params.get("nextToken") or 0)
        end = start + int(params.get("maxResults") or 100)
        answer["events"] = events[start:end]
        answer.pop("nextToken", None)
        if end < len(events):
            answer["nextToken"] = str(end)
        return answer

    def _passthrough(self, client: BaseClient, operation: str, params: Params) -> Answer:
        assert self._original is not None, "the double is not installed"
        return self._original(client, operation, params)

    def _record(  # noqa: PLR0917 - one line per call site reads best positionally
        self,
        service: str,
        operation: str,
        params: Params,
        code: str | None,
        applied: bool,
        actor: str | None = None,
    ) -> None:
        with self._lock:
            self.calls.append(
                Call(
                    service,
                    operation,
                    params,
                    code,
                    self.clock.now(),
                    applied,
                    actor or _actor.name,
                )
            )

    def _take_fault(self, service: str, operation: str) -> _Fault | None:
        queue = self._faults.get((service, operation), [])
        while queue and queue[0].remaining <= 0:
            queue.pop(0)
        if queue:
            queue[0].remaining -= 1
            return queue[0]
        if service in self._throttle_all:
            times, code = self._throttle_all[service]
            left = self._throttle_all_left.setdefault((service, operation), times)
            if left > 0:
                self._throttle_all_left[(service, operation)] = left - 1
                message = (
                    "Request limit exceeded." if code == "RequestLimitExceeded" else "Rate exceeded"
                )
                return _Fault(code, message, 0, after_success=False)
        return None

    @staticmethod
    def _client_error(client: BaseClient, operation: str, err: AwsError) -> ClientError:
        response: dict[str, Any] = {
            "Error": {"Code": err.code, "Message": err.message},
            "ResponseMetadata": {
                "RequestId": str(uuid.uuid4()),
                "HTTPStatusCode": err.status,
                "HTTPHeaders": {},
                "RetryAttempts": 0,
            },
        }
        error_class: Any = client.exceptions.from_code(err.code)
        error: ClientError = error_class(response, operation)
        return error

    def _client(self, service: str) -> BaseClient:
        if service not in self._clients:
            self._clients[service] = boto3.client(service, region_name=self.region)  # type: ignore[call-overload]
        return self._clients[service]

    def _moto(self, service: str, operation: str, params: Params) -> Answer:
        """Ask moto directly, as AWS itself would; its errors come back as AwsError."""
        assert self._original is not None, "the double is not installed"
        try:
            return self._original(self._client(service), operation, params)
        except ClientError as err:
            error = err.response["Error"]
            raise AwsError(error.get("Code", "InternalError"), error.get("Message", "")) from None

    # ------------------------------------------------------------------ EC2 lookups

    def _zones_by_name(self) -> dict[str, str]:
        if self._zones is None:
            zones = self._moto("ec2", "DescribeAvailabilityZones", {})["AvailabilityZones"]
            self._zones = {z["ZoneName"]: z["ZoneId"] for z in zones}
        return self._zones

    def _instance(self, instance_id: str) -> dict[str, Any]:
        answer = self._moto("ec2", "DescribeInstances", {"InstanceIds": [instance_id]})
        return dict(answer["Reservations"][0]["Instances"][0])

    def _moto_volume(self, volume_id: str) -> dict[str, Any]:
        answer = self._moto("ec2", "DescribeVolumes", {"VolumeIds": [volume_id]})
        return dict(answer["Volumes"][0])

    def _moto_snapshot(self, snapshot_id: str) -> dict[str, Any]:
        answer = self._moto("ec2", "DescribeSnapshots", {"SnapshotIds": [snapshot_id]})
        return dict(answer["Snapshots"][0])

    # ------------------------------------------------------------------ snapshots

    def _snapshot_state(self, snap: _Snapshot, now: datetime) -> tuple[str, str]:
        elapsed = (now - snap.start).total_seconds()
        total = self.snapshot_seconds
        if snap.fails and elapsed >= total / 2:
            return "error", "50%"
        if total <= 0 or elapsed >= total:
            return "completed", "100%"
        return "pending", f"{int(100 * elapsed / total)}%"

    def _check_snapshot_rate(self, volume_ids: list[str], now: datetime) -> None:
        for volume_id in volume_ids:
            last = self._last_snapshot_start.get(volume_id)
            if (
                last is not None
                and (now - last).total_seconds() < SNAPSHOT_PER_VOLUME_INTERVAL_SECONDS
            ):
                raise AwsError(
                    "SnapshotCreationPerVolumeRateExceeded",
                    "The maximum per volume CreateSnapshot request rate has been exceeded. "
                    "Use an increasing or variable sleep interval between requests.",
                )

    def _start_snapshot(
        self, volume_id: str, description: str, tags: list[dict[str, str]], now: datetime
    ) -> Answer:
        request: Params = {"VolumeId": volume_id, "Description": description}
        if tags:
            request["TagSpecifications"] = [{"ResourceType": "snapshot", "Tags": tags}]
        source_key = self._volume_view(self._moto_volume(volume_id)).get("KmsKeyId")
        answer = self._moto("ec2", "CreateSnapshot", request)
        snap = _Snapshot(
            answer["SnapshotId"],
            volume_id,
            now,
            fails=volume_id in self._failing_snapshot_volumes,
            kms_key_id=source_key,
        )
        self._snapshots[snap.snapshot_id] = snap
        self._last_snapshot_start[volume_id] = now
        return self._snapshot_view(answer)

    def _snapshot_view(self, moto_snapshot: dict[str, Any]) -> Answer:
        view = dict(moto_snapshot)
        view.pop("ResponseMetadata", None)
        snap = self._snapshots.get(view["SnapshotId"])
        if snap is not None:
            state, progress = self._snapshot_state(snap, self.clock.now())
            view.update(State=state, Progress=progress, StartTime=snap.start)
            if snap.kms_key_id and not view.get("KmsKeyId"):
                view["KmsKeyId"] = snap.kms_key_id
            if state == "error":
                view["StateMessage"] = "Snapshot creation failed: internal error"
        return view

    def _create_snapshot(self, params: Params) -> Answer:
        now = self.clock.now()
        volume_id = params["VolumeId"]
        self._moto_volume(volume_id)
        self._check_snapshot_rate([volume_id], now)
        tags = [
            tag
            for spec in params.get("TagSpecifications", [])
            if spec.get("ResourceType") == "snapshot"
            for tag in spec.get("Tags", [])
        ]
        return self._start_snapshot(volume_id, params.get("Description", ""), tags, now)

    def _create_snapshots(self, params: Params) -> Answer:
        now = self.clock.now()
        spec = params["InstanceSpecification"]
        instance = self._instance(spec["InstanceId"])
        root = instance.get("RootDeviceName")
        excluded = set(spec.get("ExcludeDataVolumeIds", []))
        members: list[str] = []
        for mapping in instance.get("BlockDeviceMappings", []):
            volume_id = mapping["Ebs"]["VolumeId"]
            is_boot = mapping["DeviceName"] == root
            if is_boot and volume_id in excluded:
                raise AwsError(
                    "InvalidParameterValue",
                    f"The boot volume {volume_id} cannot be excluded with ExcludeDataVolumeIds; "
                    "use ExcludeBootVolume.",
                )
            if (is_boot and spec.get("ExcludeBootVolume")) or volume_id in excluded:
                continue
            members.append(volume_id)
        unknown = excluded - {m["Ebs"]["VolumeId"] for m in instance.get("BlockDeviceMappings", [])}
        if unknown:
            raise AwsError(
                "InvalidParameterValue",
                f"The volumes {sorted(unknown)} are not attached to instance {spec['InstanceId']}.",
            )
        self._check_snapshot_rate(members, now)
        spec_tags = [
            tag
            for tag_spec in params.get("TagSpecifications", [])
            if tag_spec.get("ResourceType") == "snapshot"
            for tag in tag_spec.get("Tags", [])
        ]
        snapshots = []
        for volume_id in members:
            tags = {t["Key"]: t["Value"] for t in spec_tags}
            if params.get("CopyTagsFromSource") == "volume":
                volume_tags = self._moto_volume(volume_id).get("Tags", [])
                copied = {
                    t["Key"]: t["Value"] for t in volume_tags if not t["Key"].startswith("aws:")
                }
                tags = {**copied, **tags}
            tag_list = [{"Key": k, "Value": v} for k, v in tags.items()]
            created = self._start_snapshot(volume_id, params.get("Description", ""), tag_list, now)
            snapshots.append(
                {
                    "SnapshotId": created["SnapshotId"],
                    "VolumeId": volume_id,
                    "VolumeSize": created.get("VolumeSize"),
                    "StartTime": now,
                    "State": created["State"],
                    "Progress": created["Progress"],
                    "OwnerId": created.get("OwnerId"),
                    "Encrypted": created.get("Encrypted", False),
                    "Description": params.get("Description", ""),
                    "Tags": tag_list,
                }
            )
        return {"Snapshots": snapshots}

    def _describe_snapshots(self, params: Params) -> Answer:
        request, status_filters = _split_filters(params, {"status"})
        owners = set(request.pop("OwnerIds", []))
        moto_answer = self._moto("ec2", "DescribeSnapshots", request)
        account = os.environ.get("MOTO_ACCOUNT_ID", "123456789012")
        views = []
        for raw in moto_answer["Snapshots"]:
            if owners:
                owner_ok = (
                    raw.get("OwnerId") in owners
                    or ("self" in owners and raw.get("OwnerId") == account)
                    or ("amazon" in owners and raw.get("OwnerAlias") == "amazon")
                )
                if not owner_ok:
                    continue
            view = self._snapshot_view(raw)
            if _matches(status_filters, _constant([view["State"]])):
                views.append(view)
        page, token = _page(views, params)
        answer: Answer = {"Snapshots": page}
        if token:
            answer["NextToken"] = token
        return answer

    def _delete_snapshot(self, params: Params) -> Answer:
        snapshot_id = params["SnapshotId"]
        image = self._image_snapshots.get(snapshot_id)
        if image is not None:
            # EC2 refuses to delete a snapshot a registered AMI uses (EBS user guide, "Delete an
            # Amazon EBS snapshot"); the code and wording are EC2's (moto's InvalidSnapshotInUse).
            raise AwsError(
                "InvalidSnapshot.InUse",
                f"The snapshot {snapshot_id} is currently in use by {image}",
            )
        self._moto("ec2", "DeleteSnapshot", {"SnapshotId": snapshot_id})
        self._snapshots.pop(snapshot_id, None)
        now = self.clock.now()
        for pair in self._fsr.values():
            if pair.snapshot_id == snapshot_id and (pair.disabled is None or pair.disabled > now):
                if pair.disabling is None or pair.disabling > now:  # a failure still to come
                    pair.disabling = now
                    pair.failure_reason = None
                pair.disabled = now
        return {}

    def _register_image(self, params: Params) -> Answer:
        answer = self._moto("ec2", "RegisterImage", params)
        for mapping in params.get("BlockDeviceMappings", []):
            snapshot_id = (mapping.get("Ebs") or {}).get("SnapshotId")
            if snapshot_id:
                self._image_snapshots[snapshot_id] = str(answer["ImageId"])
        answer.pop("ResponseMetadata", None)
        return answer

    def _deregister_image(self, params: Params) -> Answer:
        answer = self._moto("ec2", "DeregisterImage", params)
        image = params["ImageId"]
        for snapshot_id in [s for s, i in self._image_snapshots.items() if i == image]:
            del self._image_snapshots[snapshot_id]
        answer.pop("ResponseMetadata", None)
        return answer

    # ------------------------------------------------------------------ volumes

    def _volume_state(self, vol: _Volume, moto_state: str, now: datetime) -> str:
        elapsed = (now - vol.created).total_seconds()
        if elapsed < self.volume_seconds:
            return "creating"
        if vol.fails:
            return "error"
        return moto_state

    def _volume_view(self, raw: dict[str, Any]) -> Answer:
        view = dict(raw)
        view.pop("ResponseMetadata", None)
        now = self.clock.now()
        vol = self._volumes.get(view["VolumeId"])
        if vol is not None:
            view["State"] = self._volume_state(vol, view.get("State", "available"), now)
            view["CreateTime"] = vol.created
            view["FastRestored"] = vol.fast_restored
            if vol.initialization_rate is not None:
                view["VolumeInitializationRate"] = vol.initialization_rate
            if vol.kms_key_id and not view.get("KmsKeyId"):
                view["KmsKeyId"] = vol.kms_key_id
        attachments = []
        for attachment in view.get("Attachments", []):
            item = dict(attachment)
            ours = self._attachments.get(view["VolumeId"])
            if ours is not None:
                item["AttachTime"] = ours.since
                if ours.detaching:
                    item["State"] = "detaching"
                elif (now - ours.since).total_seconds() < self.attach_seconds:
                    item["State"] = "attaching"
                else:
                    item["State"] = "attached"
            attachments.append(item)
        view["Attachments"] = attachments
        return view

    def _settle_detachments(self) -> None:
        now = self.clock.now()
        for volume_id, ours in list(self._attachments.items()):
            if ours.detaching and (now - ours.since).total_seconds() >= self.detach_seconds:
                self._moto(
                    "ec2",
                    "DetachVolume",
                    {"VolumeId": volume_id, "InstanceId": ours.instance_id, "Device": ours.device},
                )
                del self._attachments[volume_id]

    def _create_volume(self, params: Params) -> Answer:
        now = self.clock.now()
        token = params.get("ClientToken")
        fingerprint = json.dumps(
            {k: v for k, v in params.items() if k not in ("ClientToken", "DryRun")},
            sort_keys=True,
            default=str,
        )
        if token and token in self._client_tokens:
            known, answer = self._client_tokens[token]
            if known != fingerprint:
                raise AwsError(
                    "IdempotentParameterMismatch",
                    "The client token you have provided is associated with a resource that is "
                    "already deleted or has different parameters. Please use a different client "
                    "token.",
                )
            with contextlib.suppress(AwsError):
                return self._volume_view(self._moto_volume(answer["VolumeId"]))
            return copy.deepcopy(answer)

        request = {
            k: v
            for k, v in params.items()
            if k not in ("ClientToken", "VolumeInitializationRate", "AvailabilityZoneId")
        }
        zones = self._zones_by_name()
        zone = params.get("AvailabilityZone")
        if zone is None and params.get("AvailabilityZoneId"):
            by_id = {zone_id: name for name, zone_id in zones.items()}
            zone = by_id.get(params["AvailabilityZoneId"])
            if zone is None:
                raise AwsError(
                    "InvalidParameterValue",
                    f"Invalid availability zone ID: [{params['AvailabilityZoneId']}]",
                )
            request["AvailabilityZone"] = zone
        if zone not in zones:
            raise AwsError("InvalidParameterValue", f"Invalid availability zone: [{zone}]")

        snapshot_id = params.get("SnapshotId")
        rate = params.get("VolumeInitializationRate")
        if rate is not None:
            if not snapshot_id:
                raise AwsError(
                    "InvalidParameterValue",
                    "VolumeInitializationRate can be specified only when creating a volume "
                    "from a snapshot.",
                )
            if not 100 <= int(rate) <= 300:
                raise AwsError(
                    "InvalidParameterValue",
                    f"Invalid value '{rate}' for VolumeInitializationRate. "
                    "Valid range is 100-300 MiB/s.",
                )
        kms_key_id = params.get("KmsKeyId")
        self._check_performance(params)
        fast_restored = False
        if snapshot_id:
            snapshot = self._snapshot_view(self._moto_snapshot(snapshot_id))
            snap = self._snapshots.get(snapshot_id)
            if snap is not None and self._snapshot_state(snap, now)[0] != "completed":
                raise AwsError(
                    "IncorrectState",
                    f"Snapshot '{snapshot_id}' is in state "
                    f"'{self._snapshot_state(snap, now)[0]}', not 'completed'.",
                )
            size = params.get("Size")
            if size is not None and int(size) < int(snapshot["VolumeSize"]):
                raise AwsError(
                    "InvalidParameterValue",
                    f"Volume of {size}GiB is too small; minimum is {snapshot['VolumeSize']}GiB.",
                )
            if snapshot.get("Encrypted") and not kms_key_id:
                kms_key_id = snapshot.get("KmsKeyId")
            pair = self._fsr.get((snapshot_id, str(zone)))
            fast_restored = pair is not None and self._fsr_take_credit(
                pair, now, int(snapshot["VolumeSize"])
            )

        answer = self._moto("ec2", "CreateVolume", request)
        vol = _Volume(
            volume_id=answer["VolumeId"],
            created=now,
            snapshot_id=snapshot_id,
            fails=bool(snapshot_id) and snapshot_id in self._failing_volume_snapshots,
            initialization_rate=int(rate) if rate is not None else None,
            fast_restored=fast_restored,
            kms_key_id=kms_key_id,
        )
        self._volumes[vol.volume_id] = vol
        view = self._volume_view(answer)
        if token:
            self._client_tokens[token] = (fingerprint, copy.deepcopy(view))
        return view

    def _describe_volumes(self, params: Params) -> Answer:
        request, ours = _split_filters(params, {"status", "attachment.status"})
        views = [
            self._volume_view(v) for v in self._moto("ec2", "DescribeVolumes", request)["Volumes"]
        ]

        def values(view: Answer) -> Callable[[str], list[str]]:
            def of(name: str) -> list[str]:
                if name == "status":
                    return [view["State"]]
                return [a["State"] for a in view["Attachments"]]

            return of

        kept = [v for v in views if _matches(ours, values(v))]
        page, token = _page(kept, params, default_size=500)
        answer: Answer = {"Volumes": page}
        if token:
            answer["NextToken"] = token
        return answer

    def _attach_volume(self, params: Params) -> Answer:
        now = self.clock.now()
        volume_id, instance_id, device = params["VolumeId"], params["InstanceId"], params["Device"]
        volume = self._volume_view(self._moto_volume(volume_id))
        instance = self._instance(instance_id)
        if volume["State"] == "in-use":
            raise AwsError("VolumeInUse", f"{volume_id} is already attached to an instance")
        if volume["State"] != "available":
            raise AwsError(
                "IncorrectState", f"Volume '{volume_id}' is in the '{volume['State']}' state."
            )
        instance_state = instance.get("State", {}).get("Name")
        if instance_state not in ("running", "stopped", "pending"):
            raise AwsError(
                "IncorrectInstanceState",
                f"The instance '{instance_id}' is not in the 'running' or 'stopped' state.",
            )
        if volume["AvailabilityZone"] != instance.get("Placement", {}).get("AvailabilityZone"):
            raise AwsError(
                "InvalidVolume.ZoneMismatch",
                f"The volume '{volume_id}' is not in the same availability zone as instance "
                f"'{instance_id}'",
            )
        if any(m["DeviceName"] == device for m in instance.get("BlockDeviceMappings", [])):
            raise AwsError(
                "InvalidParameterValue",
                f"Invalid value '{device}' for unixDevice. Attachment point {device} is already "
                "in use",
            )
        answer = self._moto(
            "ec2",
            "AttachVolume",
            {"VolumeId": volume_id, "InstanceId": instance_id, "Device": device},
        )
        self._attachments[volume_id] = _Attachment(volume_id, instance_id, device, now)
        answer.pop("ResponseMetadata", None)
        answer.update(State="attaching" if self.attach_seconds > 0 else "attached", AttachTime=now)
        return answer

    def _detach_volume(self, params: Params) -> Answer:
        now = self.clock.now()
        volume_id = params["VolumeId"]
        volume = self._volume_view(self._moto_volume(volume_id))
        if not volume["Attachments"]:
            raise AwsError(
                "IncorrectState", f"Volume '{volume_id}' is in the '{volume['State']}' state."
            )
        attached = volume["Attachments"][0]
        if params.get("InstanceId") not in (None, attached["InstanceId"]) or params.get(
            "Device"
        ) not in (None, attached["Device"]):
            raise AwsError(
                "InvalidAttachment.NotFound",
                f"Volume '{volume_id}' is not attached to instance '{params.get('InstanceId')}' "
                f"as '{params.get('Device')}'.",
            )
        ours = self._attachments.get(volume_id) or _Attachment(
            volume_id, attached["InstanceId"], attached["Device"], now
        )
        if ours.detaching:
            pass
        elif self.detach_seconds > 0:
            ours.detaching = True
            ours.since = now
            self._attachments[volume_id] = ours
        else:
            self._moto(
                "ec2",
                "DetachVolume",
                {"VolumeId": volume_id, "InstanceId": ours.instance_id, "Device": ours.device},
            )
            self._attachments.pop(volume_id, None)
        return {
            "VolumeId": volume_id,
            "InstanceId": ours.instance_id,
            "Device": ours.device,
            "State": "detaching",
            "AttachTime": attached.get("AttachTime", now),
        }

    def _delete_tags(self, params: Params) -> Answer:
        """DeleteTags without Tags deletes every user-defined tag of the resources (DeleteTags API
        reference, Tag.N: "If you omit this parameter, we delete all user-defined tags for the
        specified resources"); moto deletes none. With Tags it is moto's."""
        if params.get("Tags"):
            return self._moto("ec2", "DeleteTags", params)
        resources = list(params.get("Resources") or [])
        found = self._moto(
            "ec2", "DescribeTags", {"Filters": [{"Name": "resource-id", "Values": resources}]}
        )["Tags"]
        keys = sorted({t["Key"] for t in found if not t["Key"].startswith("aws:")})
        if keys:
            self._moto(
                "ec2",
                "DeleteTags",
                {"Resources": resources, "Tags": [{"Key": k} for k in keys]},
            )
        return {}

    def _delete_volume(self, params: Params) -> Answer:
        volume_id = params["VolumeId"]
        self._moto("ec2", "DeleteVolume", {"VolumeId": volume_id})
        self._volumes.pop(volume_id, None)
        self._attachments.pop(volume_id, None)
        return {}

    # ------------------------------------------------------------------ fast snapshot restore

    def _fsr_state(self, pair: _FsrPair, now: datetime) -> str:
        if pair.disabling is not None and now >= pair.disabling:
            if self._fsr_stuck == "disabling":
                return "disabling"
            return "disabled" if pair.disabled is not None and now >= pair.disabled else "disabling"
        state = "enabling"
        if now >= pair.optimizing:
            state = "optimizing"
        if now >= pair.enabled:
            state = "enabled"
        if self._fsr_stuck in _FSR_ORDER and _FSR_ORDER[state] > _FSR_ORDER[self._fsr_stuck]:
            state = self._fsr_stuck
        return state

    def _fsr_take_credit(self, pair: _FsrPair, now: datetime, size_gib: int) -> bool:
        """Spend one volume creation credit of the pair, if it has one: a volume is fast
        restored only then. One bucket per (snapshot, AZ) pair; it starts empty once the pair
        is enabled, fills at MIN(10, 1024 / snapshot GiB) credits an hour and holds at most
        MAX(1, MIN(10, 1024 / snapshot GiB)) (EBS User Guide, "Amazon EBS fast snapshot restore
        volume creation credits"; the guide does not say whether the filling starts at enabling
        or at enabled: the double starts at enabled, the later, so a restore that waits long
        enough here waits long enough in AWS)."""
        if self._fsr_state(pair, now) != "enabled":
            return False
        per_hour = min(10.0, 1024.0 / max(1, size_gib))
        cap = max(1.0, per_hour)
        since = pair.credits_at or pair.enabled
        balance = min(cap, pair.credits + per_hour * (now - since).total_seconds() / 3600)
        pair.credits_at = now
        if balance >= 1.0:
            pair.credits = balance - 1.0
            return True
        pair.credits = balance
        return False

    def _fsr_item(self, pair: _FsrPair, now: datetime) -> Answer:
        state = self._fsr_state(pair, now)
        item: Answer = {
            "SnapshotId": pair.snapshot_id,
            "AvailabilityZone": pair.zone,
            "AvailabilityZoneId": self._zones_by_name().get(pair.zone, ""),
            "State": state,
            "StateTransitionReason": pair.failure_reason
            if pair.failure_reason and state in ("disabling", "disabled")
            else "Client.UserInitiated"
            if state in ("enabling", "disabling")
            else "Client.UserInitiated - Lifecycle state transition",
            "OwnerId": pair.owner_id,
            "EnablingTime": pair.enabling,
        }
        reached = {"enabling": 0, "optimizing": 1, "enabled": 2, "disabling": 3, "disabled": 4}
        if pair.disabling is not None and now >= pair.disabling:
            for key, when in (("OptimizingTime", pair.optimizing), ("EnabledTime", pair.enabled)):
                if when <= pair.disabling:
                    item[key] = when
            item["DisablingTime"] = pair.disabling
            if state == "disabled":
                item["DisabledTime"] = pair.disabled
        else:
            if reached[state] >= 1:
                item["OptimizingTime"] = pair.optimizing
            if reached[state] >= 2:
                item["EnabledTime"] = pair.enabled
        return item

    def _fsr_targets(
        self, params: Params
    ) -> tuple[list[tuple[str, str, dict[str, Any] | None]], list[Answer]]:
        """The (snapshot, zone) pairs a FSR call names, and per-pair refusals.

        A call naming more than FSR_MAX_SNAPSHOT_IDS snapshots is refused as a whole with
        ``InvalidRequest`` (nothing changes): EC2 answered exactly that to an Enable of more than
        ten (pingcap/tidb issue #48505, "Number of values of parameter SourceSnapshotIds must be
        less than or equal to 10"). The API reference states no maximum for either call; Disable
        takes the same SourceSnapshotIds list and is held to the same bound."""
        if len(params["SourceSnapshotIds"]) > FSR_MAX_SNAPSHOT_IDS:
            raise AwsError(
                "InvalidRequest",
                "Number of values of parameter SourceSnapshotIds must be less than or equal to "
                f"{FSR_MAX_SNAPSHOT_IDS}.",
            )
        zones = self._zones_by_name()
        by_id = {zone_id: name for name, zone_id in zones.items()}
        requested = list(params.get("AvailabilityZones", [])) + [
            by_id.get(zone_id, zone_id) for zone_id in params.get("AvailabilityZoneIds", [])
        ]
        targets: list[tuple[str, str, dict[str, Any] | None]] = []
        failures: list[Answer] = []
        for snapshot_id in params["SourceSnapshotIds"]:
            errors = []
            try:
                snapshot: dict[str, Any] | None = self._moto_snapshot(snapshot_id)
            except AwsError:
                snapshot = None
            for zone in requested:
                if snapshot is None:
                    errors.append(
                        {
                            "AvailabilityZone": zone,
                            "Error": {
                                "Code": "InvalidSnapshot.NotFound",
                                "Message": f"The snapshot '{snapshot_id}' does not exist.",
                            },
                        }
                    )
                elif zone not in zones:
                    errors.append(
                        {
                            "AvailabilityZone": zone,
                            "Error": {
                                "Code": "InvalidParameterValue",
                                "Message": f"Invalid availability zone: [{zone}]",
                            },
                        }
                    )
                else:
                    targets.append((snapshot_id, zone, snapshot))
            if errors:
                failures.append(
                    {"SnapshotId": snapshot_id, "FastSnapshotRestoreStateErrors": errors}
                )
        return targets, failures

    def _fsr_active_snapshots(self, now: datetime) -> set[str]:
        """Snapshots with FSR on (enabling, optimizing or enabled) in any AZ of the Region."""
        return {
            pair.snapshot_id
            for pair in self._fsr.values()
            if self._fsr_state(pair, now) in _FSR_ORDER
        }

    def _enable_fsr(self, params: Params) -> Answer:
        """Enable each pair; a pair that would take the Region past ``fsr_region_limit``
        snapshots with FSR on is refused as an Unsuccessful entry, the others still enable.

        The quota counts snapshots, not pairs: "You can enable up to 5 snapshots for fast
        snapshot restore per Region" (EBS User Guide, fast snapshot restore, Considerations;
        adjustable: Service Quotas, EBS "Fast snapshot restore", L-631ECBD3). A snapshot already
        on in another AZ takes no further place. The error code EC2 puts in the entry is not
        documented and no recorded answer was found: the double uses ResourceLimitExceeded, the
        code the EC2 API reference's common client errors give for exceeding a resource limit,
        and the restore does not depend on it (any refusal makes it fall back)."""
        now = self.clock.now()
        targets, failures = self._fsr_targets(params)
        successful = []
        active = self._fsr_active_snapshots(now)
        refused: dict[str, list[Answer]] = {}
        for snapshot_id, zone, snapshot in targets:
            assert snapshot is not None
            pair = self._fsr.get((snapshot_id, zone))
            off = pair is None or self._fsr_state(pair, now) in ("disabling", "disabled")
            if off and snapshot_id not in active and len(active) >= self.fsr_region_limit:
                refused.setdefault(snapshot_id, []).append(
                    {
                        "AvailabilityZone": zone,
                        "Error": {
                            "Code": FSR_QUOTA_ERROR,
                            "Message": "You can enable fast snapshot restore for at most "
                            f"{self.fsr_region_limit} snapshots in this Region.",
                        },
                    }
                )
                continue
            active.add(snapshot_id)
            if off:
                optimizing = now + timedelta(seconds=self.fsr_enabling_seconds)
                optimise_for = self.fsr_optimizing_seconds_per_gib * int(
                    snapshot.get("VolumeSize", 0)
                )
                pair = _FsrPair(
                    snapshot_id,
                    zone,
                    str(snapshot.get("OwnerId", "")),
                    enabling=now,
                    optimizing=optimizing,
                    enabled=optimizing + timedelta(seconds=optimise_for),
                )
                self._fsr[(snapshot_id, zone)] = pair
                self._fsr_history.append(pair)
                if snapshot_id in self._fsr_failing:
                    self._fail_pair(pair, self._fsr_failing[snapshot_id])
            assert pair is not None
            successful.append(self._fsr_item(pair, now))
        failures += [
            {"SnapshotId": sid, "FastSnapshotRestoreStateErrors": errors}
            for sid, errors in refused.items()
        ]
        return {"Successful": successful, "Unsuccessful": failures}

    def _disable_fsr(self, params: Params) -> Answer:
        now = self.clock.now()
        targets, failures = self._fsr_targets(params)
        successful = []
        for snapshot_id, zone, snapshot in targets:
            pair = self._fsr.get((snapshot_id, zone))
            if pair is None:
                successful.append(
                    {
                        "SnapshotId": snapshot_id,
                        "AvailabilityZone": zone,
                        "State": "disabled",
                        "OwnerId": str((snapshot or {}).get("OwnerId", "")),
                    }
                )
                continue
            if self._fsr_state(pair, now) not in ("disabling", "disabled"):
                pair.disabling = now
                pair.disabled = now + timedelta(seconds=self.fsr_disabling_seconds)
                pair.failure_reason = None  # the user's disable came before any failure
            successful.append(self._fsr_item(pair, now))
        return {"Successful": successful, "Unsuccessful": failures}

    def _describe_fsr(self, params: Params) -> Answer:
        now = self.clock.now()
        filters = params.get("Filters", [])
        items = []
        for pair in self._fsr.values():
            item = self._fsr_item(pair, now)
            fields = {
                "availability-zone": [pair.zone],
                "snapshot-id": [pair.snapshot_id],
                "state": [item["State"]],
                "owner-id": [pair.owner_id],
            }
            if _matches(filters, _lookup(fields)):
                items.append(item)
        page, token = _page(items, params, default_size=200)
        answer: Answer = {"FastSnapshotRestores": page}
        if token:
            answer["NextToken"] = token
        return answer

    # ------------------------------------------------------------------ CloudFormation

    @staticmethod
    def _list_stack_resources(params: Params) -> Answer:
        """The emulation deploys no CloudFormation stack (moto's CloudFormation needs packages
        this project does not install): every stack is one that does not exist, answered as
        CloudFormation answers it."""
        raise AwsError("ValidationError", f"Stack with id {params['StackName']} does not exist")

    # ------------------------------------------------------------------ Service Quotas

    def _get_service_quota(self, params: Params) -> Answer:
        """GetServiceQuota for EBS's "Fast snapshot restore" quota (ebs / L-631ECBD3: the code
        as ListAWSDefaultServiceQuotas lists it, default 5.0, adjustable), at the value the
        double enforces; any other quota is moto's (which knows only vpc)."""
        if (params.get("ServiceCode"), params.get("QuotaCode")) != (
            FSR_QUOTA_SERVICE_CODE,
            FSR_QUOTA_CODE,
        ):
            return self._moto("service-quotas", "GetServiceQuota", params)
        account = self._moto("sts", "GetCallerIdentity", {})["Account"]
        return {
            "Quota": {
                "ServiceCode": FSR_QUOTA_SERVICE_CODE,
                "ServiceName": "Amazon Elastic Block Store (Amazon EBS)",
                "QuotaArn": f"arn:aws:servicequotas:{self.region}:{account}:"
                f"{FSR_QUOTA_SERVICE_CODE}/{FSR_QUOTA_CODE}",
                "QuotaCode": FSR_QUOTA_CODE,
                "QuotaName": "Fast snapshot restore",
                "Value": float(self.fsr_region_limit),
                "Unit": "None",
                "Adjustable": True,
                "GlobalQuota": False,
            }
        }

    # ------------------------------------------------------------------ SSM

    def _managed_instances(self) -> dict[str, bool]:
        """Instances that have an SSM agent, and whether it is online."""
        managed: dict[str, bool] = {}
        reservations = self._moto("ec2", "DescribeInstances", {})["Reservations"]
        for reservation in reservations:
            for instance in reservation["Instances"]:
                if instance["State"]["Name"] == "terminated":
                    continue
                managed[instance["InstanceId"]] = instance["State"]["Name"] in (
                    "running",
                    "pending",
                )
        managed.update(self._agents)
        return managed

    def _describe_instance_information(self, params: Params) -> Answer:
        now = self.clock.now()
        wanted: dict[str, set[str]] = {}
        for item in params.get("InstanceInformationFilterList", []):
            wanted.setdefault(item["key"], set()).update(item["valueSet"])
        for item in params.get("Filters", []):
            wanted.setdefault(item["Key"], set()).update(item["Values"])
        infos = []
        for instance_id, online in sorted(self._managed_instances().items()):
            ping = "Online" if online else "ConnectionLost"
            info = {
                "InstanceId": instance_id,
                "PingStatus": ping,
                "LastPingDateTime": now if online else now - timedelta(hours=1),
                "AgentVersion": self.agent_version(instance_id),
                "IsLatestVersion": self.agent_version(instance_id) == CURRENT_AGENT_VERSION,
                "PlatformType": "Linux",
                "PlatformName": "Amazon Linux",
                "PlatformVersion": "2023",
                "ResourceType": "EC2Instance",
                "ComputerName": f"{instance_id}.ec2.internal",
            }
            fields: dict[str, set[str]] = {
                "InstanceIds": {instance_id},
                "PingStatus": {ping},
                "PlatformTypes": {"Linux"},
                "ResourceType": {"EC2Instance"},
            }
            if all(fields.get(key, set()) & values for key, values in wanted.items()):
                infos.append(info)
        page, token = _page(infos, params, default_size=50)
        answer: Answer = {"InstanceInformationList": page}
        if token:
            answer["NextToken"] = token
        return answer

    def _document(self, name: str) -> dict[str, Any] | None:
        """The document's content, None for AWS-owned documents moto does not carry."""
        try:
            answer = self._moto("ssm", "GetDocument", {"Name": name})
        except AwsError:
            if name.startswith("AWS-"):
                return None
            raise AwsError(
                "InvalidDocument", f"Document with name {name} does not exist."
            ) from None
        content = answer.get("Content", "")
        if answer.get("DocumentFormat") == "YAML":
            loaded: Any = yaml.safe_load(content)
        else:
            loaded = json.loads(content)
        return loaded if isinstance(loaded, dict) else {}

    @staticmethod
    def _check_parameters(name: str, document: dict[str, Any], given: dict[str, list[str]]) -> None:
        """SendCommand's own check, as the agent's renderer models it (one set of rules)."""
        try:
            validate_parameters(document, given, name)
        except InvalidParametersError as err:
            raise AwsError("InvalidParameters", str(err)) from None

    def _check_performance(self, params: Params) -> None:
        """CreateVolume refuses IOPS or throughput out of proportion to the size (Amazon EBS
        User Guide: General Purpose SSD volumes, gp3 at most 500 IOPS per GiB and 0.25 MiB/s per
        IOPS above its 3,000 IOPS / 125 MiB/s baseline; Provisioned IOPS SSD volumes, io1 50 and
        io2 1,000 IOPS per GiB)."""
        volume_type = str(params.get("VolumeType") or "gp2")
        size = params.get("Size")
        if size is None and params.get("SnapshotId"):
            size = self._snapshot_view(self._moto_snapshot(params["SnapshotId"]))["VolumeSize"]
        if size is None:
            return
        gib = int(size)
        iops = int(params["Iops"]) if params.get("Iops") is not None else None
        per_gib = {"gp3": 500, "io1": 50, "io2": 1000}.get(volume_type)
        if per_gib is not None and iops is not None:
            allowed = max(3000 if volume_type == "gp3" else 0, per_gib * gib)
            if iops > allowed:
                raise AwsError(
                    "InvalidParameterValue",
                    f"Iops to volume size ratio of {iops / gib:.6f} is too high; maximum is "
                    f"{per_gib:.6f}",
                )
        throughput = params.get("Throughput")
        if volume_type == "gp3" and throughput is not None and int(throughput) > 125:
            provisioned = iops if iops is not None else 3000
            if int(throughput) > 0.25 * provisioned:
                raise AwsError(
                    "InvalidParameterValue",
                    f"Throughput (MiBps) to iops ratio of {int(throughput) / provisioned:.6f} is "
                    "too high; maximum is 0.250000 MiBps per iops",
                )

    def _render(
        self, name: str, document: dict[str, Any] | None, context: CommandContext
    ) -> RenderedStep | None:
        """The first step as this instance's agent runs it; None for documents not modelled."""
        if document is None:
            return None
        try:
            steps = render(
                document,
                context.parameters,
                agent_version=self.agent_version(context.instance_id),
                command_id=context.command_id,
                instance_id=context.instance_id,
                region=self.region,
                document_name=name,
            )
        except UnsupportedDocumentError:
            return None
        except InvalidParametersError as err:
            raise AwsError("InvalidParameters", str(err)) from None
        return steps[0] if steps else None

    def _responder(self, document_name: str) -> Responder | None:
        if document_name in self._responders:
            return self._responders[document_name]
        suffixes = [n for n in self._responders if document_name.endswith(n)]
        return self._responders[max(suffixes, key=len)] if suffixes else None

    def _target_instances(self, params: Params) -> list[str]:
        instance_ids = list(params.get("InstanceIds", []))
        for target in params.get("Targets", []):
            key, values = target["Key"], target["Values"]
            if key == "InstanceIds":
                instance_ids.extend(values)
            elif key.startswith("tag:"):
                filters = [{"Name": key, "Values": values}]
                answer = self._moto("ec2", "DescribeInstances", {"Filters": filters})
                instance_ids.extend(
                    i["InstanceId"] for r in answer["Reservations"] for i in r["Instances"]
                )
        return list(dict.fromkeys(instance_ids))

    def _send_command(self, params: Params) -> Answer:
        now = self.clock.now()
        name = params["DocumentName"]
        document = self._document(name)
        parameters: dict[str, list[str]] = {
            k: list(v) for k, v in params.get("Parameters", {}).items()
        }
        if document is not None:
            self._check_parameters(name, document, parameters)
        instance_ids = self._target_instances(params)
        managed = self._managed_instances()
        offline = [i for i in instance_ids if not managed.get(i, False)]
        if offline or not instance_ids:
            account = os.environ.get("MOTO_ACCOUNT_ID", "123456789012")
            raise AwsError(
                "InvalidInstanceId",
                f"Instances [{offline}] not in a valid state for account {account}",
            )
        steps = (document or {}).get("mainSteps") or [{"name": "aws:runShellScript"}]
        # The agent stops a step at its timeoutSeconds (ssm_agent.execution_timeout). For
        # AWS-RunShellScript (not carried by moto) that is its executionTimeout parameter.
        fallback = execution_timeout(parameters.get("executionTimeout", ["3600"])[0], {})
        command = _Command(
            command_id=str(uuid.uuid4()),
            document_name=name,
            parameters=parameters,
            comment=params.get("Comment", ""),
            requested=now,
            timeout_seconds=int(params.get("TimeoutSeconds", 3600)),
            plugin_name=str(steps[0].get("name", "aws:runShellScript")),
        )
        responder = self._responder(name)
        for instance_id in instance_ids:
            context = CommandContext(
                instance_id, name, copy.deepcopy(parameters), command.command_id, now
            )
            step = self._render(name, document, context)
            if step is not None:
                context = dataclasses.replace(
                    context, environment=dict(step.parameters), script=step.script
                )
            outcome = responder(context) if responder is not None else CommandOutcome()
            timeout = step.timeout_seconds if step is not None else fallback
            if outcome.duration_seconds > timeout and not outcome.unresponsive:
                outcome = CommandOutcome(
                    "TimedOut", outcome.stdout, outcome.stderr, -1, float(timeout)
                )
            end = now + timedelta(seconds=max(0.0, outcome.duration_seconds))
            command.invocations[instance_id] = _Invocation(instance_id, outcome, now, end)
        self._commands[command.command_id] = command
        return {"Command": self._command_view(command, now)}

    @staticmethod
    def _invocation_status(inv: _Invocation, now: datetime) -> tuple[str, str]:
        if inv.cancelled_at is not None and inv.cancelled_at < inv.end:
            return "Cancelled", "Cancelled"
        if now < inv.end:
            return "InProgress", "InProgress"
        status = inv.outcome.status
        details = {"TimedOut": "ExecutionTimedOut"}.get(status, status)
        return status, details

    @staticmethod
    def _response_code(inv: _Invocation, status: str) -> int:
        if status in ("InProgress", "Cancelled"):
            return -1
        if status == "Failed" and inv.outcome.exit_code == 0:
            return 1
        return inv.outcome.exit_code

    def _command_view(self, command: _Command, now: datetime) -> Answer:
        statuses = [self._invocation_status(i, now)[0] for i in command.invocations.values()]
        if "InProgress" in statuses:
            status = "InProgress"
        elif all(s == "Success" for s in statuses):
            status = "Success"
        else:
            status = next(s for s in ("Failed", "TimedOut", "Cancelled") if s in statuses)
        return {
            "CommandId": command.command_id,
            "DocumentName": command.document_name,
            "DocumentVersion": "$DEFAULT",
            "Comment": command.comment,
            "ExpiresAfter": command.requested + timedelta(seconds=command.timeout_seconds),
            "Parameters": command.parameters,
            "InstanceIds": list(command.invocations),
            "Targets": [],
            "RequestedDateTime": command.requested,
            "Status": status,
            "StatusDetails": status,
            "TargetCount": len(statuses),
            "CompletedCount": sum(s != "InProgress" for s in statuses),
            "ErrorCount": sum(s in ("Failed", "TimedOut") for s in statuses),
            "DeliveryTimedOutCount": 0,
            "TimeoutSeconds": command.timeout_seconds,
            "CloudWatchOutputConfig": {"CloudWatchOutputEnabled": False},
        }

    def _invocation(
        self, command_id: str, instance_id: str, now: datetime
    ) -> tuple[_Command, _Invocation]:
        command = self._commands.get(command_id)
        inv = command.invocations.get(instance_id) if command is not None else None
        visible = command is not None and (
            (now - command.requested).total_seconds() >= self.invocation_visible_after_seconds
        )
        if command is None or inv is None or not visible:
            raise AwsError("InvocationDoesNotExist", "An error occurred (InvocationDoesNotExist)")
        return command, inv

    def _get_command_invocation(self, params: Params) -> Answer:
        now = self.clock.now()
        command, inv = self._invocation(params["CommandId"], params["InstanceId"], now)
        plugin = params.get("PluginName")
        if plugin is not None and plugin != command.plugin_name:
            raise AwsError("InvalidPluginName", f"Plugin {plugin} does not exist in the document.")
        status, details = self._invocation_status(inv, now)
        done = status not in ("InProgress",)
        end = min(inv.end, inv.cancelled_at) if inv.cancelled_at is not None else inv.end
        elapsed = (end - inv.start).total_seconds() if done else (now - inv.start).total_seconds()
        return {
            "CommandId": command.command_id,
            "InstanceId": inv.instance_id,
            "Comment": command.comment,
            "DocumentName": command.document_name,
            "DocumentVersion": "$DEFAULT",
            "PluginName": command.plugin_name,
            "ResponseCode": self._response_code(inv, status),
            "ExecutionStartDateTime": _iso(inv.start),
            "ExecutionElapsedTime": f"PT{elapsed:.3f}S",
            "ExecutionEndDateTime": _iso(end) if done else "",
            "Status": status,
            "StatusDetails": details,
            "StandardOutputContent": _truncate(inv.outcome.stdout, STDOUT_LIMIT)
            if done and status != "Cancelled"
            else "",
            "StandardOutputUrl": "",
            "StandardErrorContent": _truncate(inv.outcome.stderr, STDERR_LIMIT)
            if done and status != "Cancelled"
            else "",
            "StandardErrorUrl": "",
            "CloudWatchOutputConfig": {
                "CloudWatchLogGroupName": "",
                "CloudWatchOutputEnabled": False,
            },
        }

    def _list_command_invocations(self, params: Params) -> Answer:
        now = self.clock.now()
        command_id = params.get("CommandId")
        if command_id is not None and command_id not in self._commands:
            raise AwsError("InvalidCommandId", f"Command {command_id} does not exist.")
        items = []
        for command in self._commands.values():
            if command_id is not None and command.command_id != command_id:
                continue
            for inv in command.invocations.values():
                if params.get("InstanceId") not in (None, inv.instance_id):
                    continue
                status, details = self._invocation_status(inv, now)
                item: Answer = {
                    "CommandId": command.command_id,
                    "InstanceId": inv.instance_id,
                    "InstanceName": "",
                    "Comment": command.comment,
                    "DocumentName": command.document_name,
                    "DocumentVersion": "$DEFAULT",
                    "RequestedDateTime": command.requested,
                    "Status": status,
                    "StatusDetails": details,
                    "TraceOutput": "",
                    "StandardOutputUrl": "",
                    "StandardErrorUrl": "",
                    "CommandPlugins": [],
                    "CloudWatchOutputConfig": {"CloudWatchOutputEnabled": False},
                }
                if params.get("Details"):
                    done = status not in ("InProgress", "Cancelled")
                    output = inv.outcome.stdout
                    if inv.outcome.stderr:
                        output += "\n----------ERROR-------\n" + inv.outcome.stderr
                    plugin: Answer = {
                        "Name": command.plugin_name,
                        "Status": status,
                        "StatusDetails": details,
                        "ResponseCode": self._response_code(inv, status),
                        "ResponseStartDateTime": inv.start,
                        "Output": _truncate(output, PLUGIN_OUTPUT_LIMIT) if done else "",
                        "StandardOutputUrl": "",
                        "StandardErrorUrl": "",
                    }
                    if done:
                        plugin["ResponseFinishDateTime"] = inv.end
                    item["CommandPlugins"] = [plugin]
                items.append(item)
        page, token = _page(items, params, default_size=50)
        answer: Answer = {"CommandInvocations": page}
        if token:
            answer["NextToken"] = token
        return answer

    def _list_commands(self, params: Params) -> Answer:
        now = self.clock.now()
        command_id = params.get("CommandId")
        if command_id is not None and command_id not in self._commands:
            raise AwsError("InvalidCommandId", f"Command {command_id} does not exist.")
        commands = [
            self._command_view(c, now)
            for c in self._commands.values()
            if command_id in (None, c.command_id)
            and params.get("InstanceId") in (None, *c.invocations)
        ]
        page, token = _page(commands, params, default_size=50)
        answer: Answer = {"Commands": page}
        if token:
            answer["NextToken"] = token
        return answer

    def _cancel_command(self, params: Params) -> Answer:
        now = self.clock.now()
        command = self._commands.get(params["CommandId"])
        if command is None:
            raise AwsError("InvalidCommandId", f"Command {params['CommandId']} does not exist.")
        for inv in command.invocations.values():
            if params.get("InstanceIds") and inv.instance_id not in params["InstanceIds"]:
                continue
            if now < inv.end and inv.cancelled_at is None:
                inv.cancelled_at = now
        return {}

    # ------------------------------------------------------------------ EBS volume status

    def _describe_volume_status(self, params: Params) -> Answer:
        views = self._moto("ec2", "DescribeVolumes", {"VolumeIds": params.get("VolumeIds", [])})
        out = []
        for raw in views["Volumes"]:
            vid = raw["VolumeId"]
            st = self._volume_statuses.get(vid, _VolumeStatus())
            details = [
                {"Name": "io-enabled", "Status": st.io_enabled},
                {"Name": "io-performance", "Status": st.io_performance},
            ]
            actions = [
                {
                    "Code": "enable-volume-io",
                    "Description": "Enable volume I/O",
                    "EventId": e["EventId"],
                    "EventType": e["EventType"],
                }
                for e in st.events
                if e["EventType"] == "potential-data-inconsistency"
            ]
            out.append(
                {
                    "VolumeId": vid,
                    "AvailabilityZone": raw["AvailabilityZone"],
                    "VolumeStatus": {"Status": st.status, "Details": details},
                    "Events": copy.deepcopy(st.events),
                    "Actions": actions,
                    "AttachmentStatuses": [
                        {"InstanceId": a["InstanceId"], "IoPerformance": "normal"}
                        for a in raw.get("Attachments", [])
                    ],
                }
            )
        return {"VolumeStatuses": out}

    # ------------------------------------------------------------------ lifecycle actions

    def _expire(self, action: _LifecycleAction, now: datetime) -> None:
        if action.result is None and now > min(action.deadline, action.global_deadline):
            action.result = action.default_result

    def _lifecycle_action(self, params: Params) -> _LifecycleAction:
        token = params.get("LifecycleActionToken")
        found = [
            a
            for a in self._lifecycle_actions.values()
            if (token and a.token == token)
            or (not token and a.instance_id == params.get("InstanceId"))
        ]
        now = self.clock.now()
        for action in found:
            self._expire(action, now)
        live = [
            a
            for a in found
            if a.result is None
            and a.group == params["AutoScalingGroupName"]
            and a.hook == params["LifecycleHookName"]
        ]
        if not live:
            what = f"token {token}" if token else f"instance ID {params.get('InstanceId')}"
            raise AwsError("ValidationError", f"No active Lifecycle Action found with {what}")
        return live[0]

    def _lifecycle_heartbeat(self, params: Params) -> Answer:
        action = self._lifecycle_action(params)
        now = self.clock.now()
        action.heartbeats.append(now)
        action.deadline = min(
            now + timedelta(seconds=action.heartbeat_timeout), action.global_deadline
        )
        return {}

    def _complete_lifecycle_action(self, params: Params) -> Answer:
        action = self._lifecycle_action(params)
        action.result = str(params["LifecycleActionResult"])
        return {}
