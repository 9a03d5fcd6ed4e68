"""Snapshots in the Recycle Bin: deleted while a retention rule matched them, kept there (with
their tags) until the rule's retention period ends, invisible to DescribeSnapshots, and whole
again once restored (Amazon EBS User Guide, "Recycle Bin": "While a resource is in the Recycle
Bin, you can only view it, restore it, or modify its tags"; RestoreSnapshotFromRecycleBin)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from raidsnap import clients


@dataclass(frozen=True)
class Binned:
    snapshot_id: str
    volume_id: str
    # When the Recycle Bin deletes it for good (RecycleBinExitTime).
    leaves: datetime | None


def binned(snapshot_ids: Iterable[str]) -> dict[str, Binned]:
    """Those of these snapshots that are in the Recycle Bin. The whole bin is listed and
    filtered here: what ListSnapshotsInRecycleBin answers for an id that is not in the bin is
    not documented, and the bin holds few snapshots."""
    wanted = set(snapshot_ids)
    if not wanted:
        return {}
    pages = clients.ec2().get_paginator("list_snapshots_in_recycle_bin").paginate()
    return {
        str(s["SnapshotId"]): Binned(
            str(s["SnapshotId"]), str(s.get("VolumeId", "")), s.get("RecycleBinExitTime")
        )
        for page in pages
        for s in page.get("Snapshots", [])
        if s.get("SnapshotId") in wanted
    }
