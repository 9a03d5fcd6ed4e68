"""The Recycle Bin for EBS snapshots: a snapshot deleted while a retention rule matches it is
kept, not deleted, until the rule's retention period ends.

Rules, from the Amazon EBS User Guide ("Recycle Bin", "Considerations for Recycle Bin") and the
EC2 API Reference (ListSnapshotsInRecycleBin, RestoreSnapshotFromRecycleBin): a snapshot in the
bin is not listed by DescribeSnapshots and can't be used ("While a resource is in the Recycle
Bin, you can only view it, restore it, or modify its tags"); it can't be deleted by hand; the
bin deletes it for good when its retention period ends (RecycleBinExitTime); restored, it is a
snapshot as before, with its tags. A retention rule is made with the Recycle Bin API (rbin
CreateRule), which the emulation does not model: ``retain_deleted_snapshots`` stands for a
Region-level rule for every EBS snapshot."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from raidsnap_emulation.clock import VirtualClock
from raidsnap_emulation.double.base import Answer, AwsError, DoubleBase, Params, _page


@dataclass
class _Binned:
    snapshot_id: str
    volume_id: str
    description: str
    entered: datetime
    leaves: datetime


class RecycleBin(DoubleBase):
    """ListSnapshotsInRecycleBin and RestoreSnapshotFromRecycleBin; ``to_recycle_bin`` is what
    DeleteSnapshot does instead of deleting while a rule holds (ec2.py)."""

    def __init__(self, clock: VirtualClock, region: str = "us-east-1") -> None:
        super().__init__(clock, region)
        self._bin_retention: timedelta | None = None
        self._binned: dict[str, _Binned] = {}
        self._handlers.update(
            {
                ("ec2", "ListSnapshotsInRecycleBin"): self._list_recycle_bin,
                ("ec2", "RestoreSnapshotFromRecycleBin"): self._restore_from_recycle_bin,
            }
        )

    def retain_deleted_snapshots(self, days: int | None) -> None:
        """A retention rule for every EBS snapshot of the Region, kept ``days`` (None: no rule)."""
        with self._lock:
            self._bin_retention = timedelta(days=days) if days else None

    def in_recycle_bin(self, snapshot_id: str) -> bool:
        with self._lock:
            self._empty_recycle_bin()
            return snapshot_id in self._binned

    def to_recycle_bin(self, snapshot_id: str) -> bool:
        """Keep a snapshot being deleted in the bin when a rule holds it; False: no rule."""
        if self._bin_retention is None:
            return False
        raw = self._moto_snapshot(snapshot_id)
        now = self.clock.now()
        self._binned[snapshot_id] = _Binned(
            snapshot_id,
            str(raw.get("VolumeId", "")),
            str(raw.get("Description", "")),
            now,
            now + self._bin_retention,
        )
        return True

    def refuse_binned(self, snapshot_id: str) -> None:
        """A snapshot in the bin is not there for any other call."""
        self._empty_recycle_bin()
        if snapshot_id in self._binned:
            raise AwsError(
                "InvalidSnapshot.NotFound", f"The snapshot '{snapshot_id}' does not exist."
            )

    def _empty_recycle_bin(self) -> None:
        now = self.clock.now()
        for gone in [b for b in self._binned.values() if b.leaves <= now]:
            del self._binned[gone.snapshot_id]
            self._moto("ec2", "DeleteSnapshot", {"SnapshotId": gone.snapshot_id})

    def _list_recycle_bin(self, params: Params) -> Answer:
        self._empty_recycle_bin()
        wanted = set(params.get("SnapshotIds") or [])
        views = [
            {
                "SnapshotId": b.snapshot_id,
                "RecycleBinEnterTime": b.entered,
                "RecycleBinExitTime": b.leaves,
                "Description": b.description,
                "VolumeId": b.volume_id,
            }
            for b in sorted(self._binned.values(), key=lambda b: b.entered)
            if not wanted or b.snapshot_id in wanted
        ]
        page, token = _page(views, params)
        answer: Answer = {"Snapshots": page}
        if token:
            answer["NextToken"] = token
        return answer

    def _restore_from_recycle_bin(self, params: Params) -> Answer:
        self._empty_recycle_bin()
        snapshot_id = str(params["SnapshotId"])
        if self._binned.pop(snapshot_id, None) is None:
            raise AwsError(
                "InvalidSnapshot.NotFound",
                f"The snapshot '{snapshot_id}' is not in the Recycle Bin.",
            )
        view = self._restored_view(self._moto_snapshot(snapshot_id))
        keys = (
            "SnapshotId", "OutpostArn", "Description", "Encrypted", "OwnerId", "Progress",
            "StartTime", "State", "VolumeId", "VolumeSize", "SseType",
        )  # fmt: skip
        return {k: view[k] for k in keys if k in view}

    def _restored_view(self, raw: Answer) -> Answer:
        """The snapshot as DescribeSnapshots would show it (ec2.py adds state and progress)."""
        return dict(raw)
