"""EBS snapshot lock as it behaves, on the virtual clock: LockSnapshot, UnlockSnapshot,
DescribeLockedSnapshots, and the refusal to delete a locked snapshot.

Rules, from the Amazon EBS User Guide ("Amazon EBS snapshot lock", "Snapshot lock concepts") and
the EC2 API Reference (LockSnapshot, UnlockSnapshot, DescribeLockedSnapshots):
- a locked snapshot can't be deleted by any user, whatever their IAM permissions, until the lock
  expires (or, where allowed, is unlocked);
- governance: unlockable, and its mode and duration changeable, at any time;
- compliance: during the optional cooling-off period (CoolOffPeriod, 1-72 hours, compliance only)
  as governance; after it, no unlock, no change of mode, and the duration or expiry date may only
  grow;
- LockDuration (1-36500 days) or ExpirationDate, exactly one of them; a lock on a pending
  snapshot counts its duration from when the snapshot completes (LockDurationStartTime);
- lock states: compliance-cooloff, governance, compliance, expired.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from raidsnap_emulation.clock import VirtualClock
from raidsnap_emulation.double.base import (
    Answer,
    AwsError,
    DoubleBase,
    Params,
    _lookup,
    _matches,
    _page,
)

# EC2 refuses to delete a locked snapshot (and to unlock or weaken a compliance lock after its
# cooling-off period). The EC2 error list available here does not name the code it answers with;
# this one stands for it. raidsnap keys nothing on it: retention never asks to delete a snapshot
# DescribeLockedSnapshots reports locked, and reports any refusal of a delete by its code.
LOCKED_CODE = "SnapshotLocked"


@dataclass
class _Lock:
    snapshot_id: str
    owner_id: str
    mode: str
    created: datetime
    duration_start: datetime
    expires: datetime
    duration_days: int | None
    cool_off_hours: int | None
    cool_off_expires: datetime | None

    def state(self, now: datetime) -> str:
        if now >= self.expires:
            return "expired"
        if self.mode == "compliance" and self.cool_off_expires and now < self.cool_off_expires:
            return "compliance-cooloff"
        return self.mode

    def view(self, now: datetime) -> Answer:
        out: Answer = {
            "OwnerId": self.owner_id,
            "SnapshotId": self.snapshot_id,
            "LockState": self.state(now),
            "LockCreatedOn": self.created,
            "LockDurationStartTime": self.duration_start,
            "LockExpiresOn": self.expires,
        }
        if self.duration_days is not None:
            out["LockDuration"] = self.duration_days
        if self.cool_off_hours is not None and self.cool_off_expires is not None:
            out["CoolOffPeriod"] = self.cool_off_hours
            out["CoolOffPeriodExpiresOn"] = self.cool_off_expires
        return out


class SnapshotLocks(DoubleBase):
    """LockSnapshot, UnlockSnapshot and DescribeLockedSnapshots; ``refuse_locked_delete`` is
    what DeleteSnapshot asks first (ec2.py)."""

    def __init__(self, clock: VirtualClock, region: str = "us-east-1") -> None:
        super().__init__(clock, region)
        self._locks: dict[str, _Lock] = {}
        self._handlers.update(
            {
                ("ec2", "LockSnapshot"): self._lock_snapshot,
                ("ec2", "UnlockSnapshot"): self._unlock_snapshot,
                ("ec2", "DescribeLockedSnapshots"): self._describe_locked_snapshots,
            }
        )

    def _completes_at(self, snapshot_id: str) -> datetime:  # pragma: no cover - ec2.py's
        raise NotImplementedError

    def lock_state(self, snapshot_id: str) -> str | None:
        """The snapshot's lock state now (None: never locked)."""
        with self._lock:
            found = self._locks.get(snapshot_id)
            return found.state(self.clock.now()) if found else None

    def refuse_locked_delete(self, snapshot_id: str) -> None:
        found = self._locks.get(snapshot_id)
        if found is not None and found.state(self.clock.now()) != "expired":
            raise AwsError(
                LOCKED_CODE,
                f"The snapshot '{snapshot_id}' is locked in {found.mode} mode until "
                f"{found.expires:%Y-%m-%dT%H:%M:%SZ} and can't be deleted.",
            )

    def _lock_terms(self, params: Params, start: datetime) -> tuple[datetime, int | None]:
        days, until = params.get("LockDuration"), params.get("ExpirationDate")
        if (days is None) == (until is None):
            raise AwsError(
                "InvalidParameterCombination",
                "Specify either LockDuration or ExpirationDate, but not both.",
            )
        if days is not None:
            if not 1 <= int(days) <= 36500:
                raise AwsError("InvalidParameterValue", f"Invalid LockDuration: {days}")
            return start + timedelta(days=int(days)), int(days)
        return until if isinstance(until, datetime) else datetime.fromisoformat(str(until)), None

    def _lock_snapshot(self, params: Params) -> Answer:
        now = self.clock.now()
        snapshot_id = str(params["SnapshotId"])
        owner = str(self._moto_snapshot(snapshot_id).get("OwnerId", ""))
        mode = str(params["LockMode"])
        cool_off = params.get("CoolOffPeriod")
        if cool_off is not None and (mode != "compliance" or not 1 <= int(cool_off) <= 72):
            raise AwsError(
                "InvalidParameterCombination",
                "CoolOffPeriod applies to compliance mode only, from 1 to 72 hours.",
            )
        start = max(now, self._completes_at(snapshot_id))
        expires, days = self._lock_terms(params, start)
        earlier = self._locks.get(snapshot_id)
        if earlier is not None and earlier.state(now) == "compliance":
            if mode != "compliance" or expires < earlier.expires:
                raise AwsError(
                    LOCKED_CODE,
                    f"The snapshot '{snapshot_id}' is locked in compliance mode: its lock can "
                    "only be extended.",
                )
            cool_off, cool_off_until = earlier.cool_off_hours, earlier.cool_off_expires
        else:
            cool_off_until = now + timedelta(hours=int(cool_off)) if cool_off else None
        lock = _Lock(
            snapshot_id,
            owner,
            mode,
            now,
            start,
            expires,
            days,
            int(cool_off) if cool_off else None,
            cool_off_until,
        )
        self._locks[snapshot_id] = lock
        answer = lock.view(now)
        answer.pop("OwnerId")
        return answer

    def _unlock_snapshot(self, params: Params) -> Answer:
        snapshot_id = str(params["SnapshotId"])
        self._moto_snapshot(snapshot_id)
        found = self._locks.get(snapshot_id)
        if found is not None and found.state(self.clock.now()) == "compliance":
            raise AwsError(
                LOCKED_CODE,
                f"The snapshot '{snapshot_id}' is locked in compliance mode and its cooling-off "
                "period has expired: it can't be unlocked.",
            )
        self._locks.pop(snapshot_id, None)
        return {"SnapshotId": snapshot_id}

    def _describe_locked_snapshots(self, params: Params) -> Answer:
        now = self.clock.now()
        wanted = set(params.get("SnapshotIds") or [])
        filters: list[dict[str, Any]] = list(params.get("Filters") or [])
        views = [
            lock.view(now)
            for snapshot_id, lock in sorted(self._locks.items())
            if not wanted or snapshot_id in wanted
        ]
        views = [v for v in views if _matches(filters, _lookup({"lock-state": [v["LockState"]]}))]
        page, token = _page(views, params)
        answer: Answer = {"Snapshots": page}
        if token:
            answer["NextToken"] = token
        return answer
