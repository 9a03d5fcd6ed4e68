"""What happens to instances and volumes outside the workflows: EBS volume status checks
(DescribeVolumeStatus) of an impaired volume, and the launch lifecycle actions of Auto Scaling
groups (heartbeats, completion, timeouts)."""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from raidsnap_emulation.clock import VirtualClock
from raidsnap_emulation.double.base import (
    Answer,
    AwsError,
    DoubleBase,
    Params,
)


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


class Health(DoubleBase):
    """DescribeVolumeStatus, RecordLifecycleActionHeartbeat, CompleteLifecycleAction,
    DescribeAutoScalingInstances."""

    def __init__(self, clock: VirtualClock, region: str = "us-east-1") -> None:
        super().__init__(clock, region)
        self._volume_statuses: dict[str, _VolumeStatus] = {}
        self._lifecycle_actions: dict[str, _LifecycleAction] = {}
        self._handlers.update(
            {
                ("ec2", "DescribeVolumeStatus"): self._describe_volume_status,
                ("autoscaling", "RecordLifecycleActionHeartbeat"): self._lifecycle_heartbeat,
                ("autoscaling", "CompleteLifecycleAction"): self._complete_lifecycle_action,
                ("autoscaling", "DescribeAutoScalingInstances"): self._describe_asg_instances,
            }
        )

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

    def _describe_asg_instances(self, params: Params) -> Answer:
        """The lifecycle state of each asked-for instance launched with a lifecycle action
        ("Amazon EC2 Auto Scaling instance lifecycle", user guide): Pending:Wait while the action
        waits, InService once completed with CONTINUE, Terminating once ended with ABANDON
        (completed so, or by its timeout with the hook's default result). Instances the double
        launched without an action are not listed (as for an instance in no group)."""
        now = self.clock.now()
        asked = set(params.get("InstanceIds") or [])
        out = []
        with self._lock:
            for action in self._lifecycle_actions.values():
                if asked and action.instance_id not in asked:
                    continue
                self._expire(action, now)
                state = {None: "Pending:Wait", "CONTINUE": "InService"}.get(
                    action.result, "Terminating"
                )
                out.append(
                    {
                        "InstanceId": action.instance_id,
                        "AutoScalingGroupName": action.group,
                        "LifecycleState": state,
                        "HealthStatus": "HEALTHY",
                        "ProtectedFromScaleIn": False,
                    }
                )
        return {"AutoScalingInstances": out}
