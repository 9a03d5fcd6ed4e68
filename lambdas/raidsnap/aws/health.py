"""EC2's view of an array's members when its instance's attached-EBS alarm fires."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from raidsnap import clients
from raidsnap.aws import error_code, instances


def volume_statuses(volume_ids: list[str]) -> list[dict[str, Any]]:
    """DescribeVolumeStatus's VolumeStatuses of these volumes."""
    if not volume_ids:
        return []
    found = clients.ec2().describe_volume_status(VolumeIds=volume_ids)["VolumeStatuses"]
    return [dict(st) for st in found]


def tags_of_existing(volume_ids: list[str]) -> dict[str, dict[str, str]]:
    """Tags of these volumes; a deleted one has none (it is missing, not replaced)."""
    try:
        return instances.volume_tags(volume_ids)
    except ClientError as err:
        if error_code(err) != "InvalidVolume.NotFound":
            raise
    out: dict[str, dict[str, str]] = {}
    for vid in volume_ids:
        try:
            out.update(instances.volume_tags([vid]))
        except ClientError as err:
            if error_code(err) != "InvalidVolume.NotFound":
                raise
    return out
