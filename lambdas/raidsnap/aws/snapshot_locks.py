"""EBS snapshot lock: which snapshots are locked, and locking one.

A locked snapshot "can't be deleted by any user, regardless of their IAM permissions" until its
lock expires (Amazon EBS User Guide, "Amazon EBS snapshot lock"). Lock states (EC2 API
Reference, DescribeLockedSnapshots): ``governance`` and ``compliance-cooloff`` (locked; can be
unlocked by those allowed to), ``compliance`` (locked; no one can unlock it), ``expired`` (not
locked any more)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from raidsnap import clients
from raidsnap.lock_settings import LockPolicy

HOLDING = ("governance", "compliance-cooloff", "compliance")
# SnapshotIds per DescribeLockedSnapshots call, as raidsnap asks DescribeSnapshots.
_IDS_PER_CALL = 200


@dataclass(frozen=True)
class SnapshotLock:
    snapshot_id: str
    state: str
    expires: datetime | None

    @property
    def holds(self) -> bool:
        """The snapshot can't be deleted now."""
        return self.state in HOLDING


def _of(raw: dict[str, Any]) -> SnapshotLock:
    return SnapshotLock(
        str(raw["SnapshotId"]), str(raw.get("LockState", "")), raw.get("LockExpiresOn")
    )


def holding(snapshot_ids: Iterable[str], region: str | None = None) -> dict[str, SnapshotLock]:
    """The locks that hold any of these snapshots now (expired locks hold nothing); of another
    Region's snapshots (copies there) with ``region``."""
    ids = sorted(set(snapshot_ids))
    out: dict[str, SnapshotLock] = {}
    for start in range(0, len(ids), _IDS_PER_CALL):
        params: dict[str, Any] = {"SnapshotIds": ids[start : start + _IDS_PER_CALL]}
        while True:
            page = clients.ec2(region).describe_locked_snapshots(**params)
            for raw in page.get("Snapshots", []):
                lock = _of(dict(raw))
                if lock.holds:
                    out[lock.snapshot_id] = lock
            if not page.get("NextToken"):
                break
            params["NextToken"] = page["NextToken"]
    return out


def lock(snapshot_id: str, policy: LockPolicy) -> SnapshotLock:
    """Lock one snapshot for the policy's days (LockDuration, counted from when the snapshot
    completes), with its cooling-off period in compliance mode."""
    params: dict[str, Any] = {
        "SnapshotId": snapshot_id,
        "LockMode": policy.mode,
        "LockDuration": policy.days,
    }
    if policy.mode == "compliance" and policy.cool_off_hours:
        params["CoolOffPeriod"] = policy.cool_off_hours
    return _of(dict(clients.ec2().lock_snapshot(**params)))
