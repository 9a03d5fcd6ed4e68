"""Faults the tests inject: throttling and errors per operation (before or after the call takes
effect), throttling of every mutating call, and eventual consistency of new resources."""

from __future__ import annotations

from dataclasses import dataclass

from raidsnap_emulation.clock import VirtualClock
from raidsnap_emulation.double.base import (
    Answer,
    AwsError,
    DoubleBase,
    Params,
)


@dataclass
class _Fault:
    code: str
    message: str
    remaining: int
    after_success: bool


class Faults(DoubleBase):
    """Injected errors and eventual consistency, consulted by the dispatcher on every call."""

    def __init__(self, clock: VirtualClock, region: str = "us-east-1") -> None:
        super().__init__(clock, region)
        # Eventual consistency: resource id -> calls that still do not see it.
        self._consistency_lag = 0
        self._lagging: dict[str, int] = {}
        self._faults: dict[tuple[str, str], list[_Fault]] = {}
        self._throttle_all: dict[str, tuple[int, str]] = {}
        self._throttle_all_left: dict[tuple[str, str], int] = {}

    def eventually_consistent(self, calls: int = 2) -> None:
        """From now on, each snapshot or volume a create returns stays unseen by the next
        ``calls`` calls that name it or list its kind: CreateTags and a Describe by id answer
        InvalidSnapshot.NotFound / InvalidVolume.NotFound, a Describe by filter leaves it out.
        EC2 does this sometimes right after a create ("Eventual consistency in the Amazon EC2
        API", EC2 Developer Guide); 0 turns it off."""
        with self._lock:
            self._consistency_lag = calls

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
