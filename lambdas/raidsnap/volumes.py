"""EBS volumes a restore creates, attaches, and (on failure) removes again."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from raidsnap import clients, tags
from raidsnap.aws import error_code

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import TagSpecificationTypeDef


@dataclass(frozen=True)
class VolumeSpec:
    """One member's volume as it will be created."""

    index: int
    snapshot_id: str
    volume_type: str
    iops: int | None
    throughput: int | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "snapshotId": self.snapshot_id,
            "volumeType": self.volume_type,
            "iops": self.iops,
            "throughput": self.throughput,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> VolumeSpec:
        return cls(
            index=int(raw["index"]),
            snapshot_id=str(raw["snapshotId"]),
            volume_type=str(raw["volumeType"]),
            iops=None if raw.get("iops") is None else int(raw["iops"]),
            throughput=None if raw.get("throughput") is None else int(raw["throughput"]),
        )


@dataclass(frozen=True)
class VolumeView:
    volume_id: str
    state: str
    attachments: tuple[tuple[str, str, str], ...]  # (instance id, device, state)
    fast_restored: bool
    tags: Mapping[str, str]


def client_token(execution_arn: str, index: int) -> str:
    """Same execution and member, same token: a retried CreateVolume returns the first volume.
    EC2 allows 64 characters; a hash keeps long execution ARNs within that."""
    digest = hashlib.sha256(f"{execution_arn}#{index}".encode()).hexdigest()
    return f"raidsnap-{digest[:48]}"


def create(
    spec: VolumeSpec,
    *,
    zone: str,
    execution_arn: str,
    array: str,
    set_id: str,
    initialization_rate: int | None,
    extra_tags: Mapping[str, str],
) -> str:
    """CreateVolume for one member. Size and encryption come from the snapshot: a volume from an
    encrypted snapshot is encrypted with the snapshot's KMS key unless another key is named,
    and none is."""
    volume_tags = dict(extra_tags) | {
        tags.ARRAY: array,
        tags.SET_ID: set_id,
        tags.MEMBER_INDEX: str(spec.index),
        tags.RESTORE_EXECUTION: execution_arn,
        "Name": f"{array}-{spec.index} ({set_id})",
    }
    tag_spec: TagSpecificationTypeDef = {
        "ResourceType": "volume",
        "Tags": [{"Key": k, "Value": v} for k, v in volume_tags.items()],
    }
    params: dict[str, Any] = {
        "AvailabilityZone": zone,
        "SnapshotId": spec.snapshot_id,
        "VolumeType": spec.volume_type,
        "TagSpecifications": [tag_spec],
        "ClientToken": client_token(execution_arn, spec.index),
    }
    if spec.iops is not None:
        params["Iops"] = spec.iops
    if spec.throughput is not None:
        params["Throughput"] = spec.throughput
    if initialization_rate is not None:
        params["VolumeInitializationRate"] = initialization_rate
    return str(clients.ec2().create_volume(**params)["VolumeId"])


def view(raw: Mapping[str, Any]) -> VolumeView:
    return VolumeView(
        volume_id=raw["VolumeId"],
        state=str(raw.get("State", "")),
        attachments=tuple(
            (str(a.get("InstanceId", "")), str(a.get("Device", "")), str(a.get("State", "")))
            for a in raw.get("Attachments", [])
        ),
        fast_restored=bool(raw.get("FastRestored", False)),
        tags=tags.as_dict(raw.get("Tags")),
    )


def describe(volume_ids: Iterable[str]) -> dict[str, VolumeView]:
    """One DescribeVolumes for all of them; volumes that no longer exist are left out."""
    ids = sorted(set(volume_ids))
    if not ids:
        return {}
    try:
        raw = clients.ec2().describe_volumes(VolumeIds=ids)["Volumes"]
    except ClientError as err:
        if error_code(err) != "InvalidVolume.NotFound":
            raise
        # One of them is gone (deleted, or not yet visible): ask by filter, which skips it.
        raw = clients.ec2().describe_volumes(Filters=[{"Name": "volume-id", "Values": ids}])[
            "Volumes"
        ]
    return {v["VolumeId"]: view(v) for v in raw}


def created_by(execution_arn: str) -> dict[str, VolumeView]:
    """Every volume this execution created, found by its tag (a lost CreateVolume answer
    included)."""
    pages = (
        clients.ec2()
        .get_paginator("describe_volumes")
        .paginate(Filters=[{"Name": f"tag:{tags.RESTORE_EXECUTION}", "Values": [execution_arn]}])
    )
    return {v["VolumeId"]: view(v) for page in pages for v in page["Volumes"]}


# Device names for EBS data volumes on Linux: /dev/sd[f-z] first, as EC2 recommends, then the
# two-letter names /dev/xvd[b-c][a-z] it also lists as available on HVM instances.
DEVICE_NAMES = tuple(f"/dev/sd{c}" for c in "fghijklmnopqrstuvwxyz") + tuple(
    f"/dev/xvd{a}{b}" for a in "bc" for b in "abcdefghijklmnopqrstuvwxyz"
)


def _suffix(device: str) -> str:
    name = device.rsplit("/", 1)[-1]
    for prefix in ("xvd", "sd", "hd"):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def free_device_names(in_use: Iterable[str], count: int) -> list[str]:
    """``count`` names no attachment uses. /dev/sdf and /dev/xvdf are one device to Xen
    instances, so a name is taken when either spelling is."""
    taken = {_suffix(d) for d in in_use}
    free = [d for d in DEVICE_NAMES if _suffix(d) not in taken]
    if len(free) < count:
        raise ValueError(f"only {len(free)} free device names, {count} needed")
    return free[:count]


def attach(volume_id: str, instance_id: str, device: str) -> None:
    clients.ec2().attach_volume(VolumeId=volume_id, InstanceId=instance_id, Device=device)


def detach(volume_id: str, instance_id: str, *, force: bool = False) -> None:
    try:
        clients.ec2().detach_volume(VolumeId=volume_id, InstanceId=instance_id, Force=force)
    except ClientError as err:
        # Already detached (a retried step, or EC2 was quicker than our look).
        if error_code(err) not in ("IncorrectState", "InvalidAttachment.NotFound"):
            raise


def delete(volume_id: str) -> None:
    try:
        clients.ec2().delete_volume(VolumeId=volume_id)
    except ClientError as err:
        if error_code(err) != "InvalidVolume.NotFound":
            raise


def remove_created(
    views: Mapping[str, VolumeView],
    execution_arn: str,
    progress: dict[str, Any],
    force_after: int,
) -> list[str]:
    """One pass of removing the volumes ``execution_arn`` created, and only those: detach what
    is attached (forcing it once it has been asked ``force_after`` times), delete what is
    detached. ``progress`` keeps ``detachAsks`` and ``deleted`` across passes; returns the
    volumes still on their way (detaching, or still creating)."""
    asks_by_volume: dict[str, int] = progress.setdefault("detachAsks", {})
    deleted: list[str] = progress.setdefault("deleted", [])
    pending = []
    for vid, view in sorted(views.items()):
        if view.tags.get(tags.RESTORE_EXECUTION) != execution_arn:
            continue  # never touch a volume this run did not create
        if view.state in ("deleting", "deleted"):
            continue
        live = [x for x in view.attachments if x[2] in ("attaching", "attached", "busy")]
        if live or any(x[2] == "detaching" for x in view.attachments):
            asks = int(asks_by_volume.get(vid, 0))
            force = asks >= force_after
            if live or force:
                for instance_id, _device, _state in view.attachments:
                    detach(vid, instance_id, force=force)
            asks_by_volume[vid] = asks + 1
            pending.append(vid)
        elif view.state == "creating":
            pending.append(vid)
        else:
            delete(vid)
            deleted.append(vid)
    return pending
