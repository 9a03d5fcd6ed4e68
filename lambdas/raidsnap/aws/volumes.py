"""EBS volumes a restore creates, attaches, and (on failure) removes again."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from raidsnap import clients, tags
from raidsnap.aws import error_code
from raidsnap.plan import tag_limit
from raidsnap.plan.cleanup import disposition
from raidsnap.plan.volumes import Attachment, VolumeSpec, VolumeView, client_token, owned_by

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import TagSpecificationTypeDef


# The tags raidsnap adds to a restored volume after creating it: its own md UUID once assembled
# (raidsnap.workflows.restore.finish), and replaced-by when a later replace retires it.
LATER_TAGS = (tags.MD_UUID, tags.REPLACED_BY)


def create(
    spec: VolumeSpec,
    *,
    zone: str,
    execution_arn: str,
    run: str,
    array: str,
    set_id: str,
    initialization_rate: int | None,
    extra_tags: Mapping[str, str],
    read_only: bool = False,
) -> tuple[str, tuple[str, ...]]:
    """CreateVolume for one member; returns its id and the ``extra_tags`` (the snapshot's user
    tags) that did not fit beside raidsnap's own (raidsnap.plan.tag_limit). Size and encryption
    come from the snapshot: a volume from an encrypted snapshot is encrypted with the
    snapshot's KMS key unless another key is named, and none is."""
    own = {
        tags.ARRAY: array,
        tags.RESTORED_FROM: set_id,
        tags.RESTORED_MEMBER_INDEX: str(spec.index),
        tags.RESTORE_EXECUTION: execution_arn,
        tags.RESTORE_RUN: run,
        "Name": f"{array}-{spec.index} ({set_id})",
    }
    if read_only:
        own[tags.READ_ONLY_COPY] = "true"
    copied = {k: v for k, v in extra_tags.items() if k not in (tags.SET_ID, tags.MEMBER_INDEX)}
    fitted = tag_limit.fit(own, copied, later=LATER_TAGS)
    tag_spec: TagSpecificationTypeDef = {
        "ResourceType": "volume",
        "Tags": [{"Key": k, "Value": v} for k, v in (fitted.kept | own).items()],
    }
    params: dict[str, Any] = {
        "AvailabilityZone": zone,
        "SnapshotId": spec.snapshot_id,
        "VolumeType": spec.volume_type,
        "TagSpecifications": [tag_spec],
        "ClientToken": client_token(execution_arn, run, spec.index),
    }
    if spec.iops is not None:
        params["Iops"] = spec.iops
    if spec.throughput is not None:
        params["Throughput"] = spec.throughput
    if initialization_rate is not None:
        params["VolumeInitializationRate"] = initialization_rate
    return str(clients.ec2().create_volume(**params)["VolumeId"]), fitted.dropped


def view(raw: Mapping[str, Any]) -> VolumeView:
    return VolumeView(
        volume_id=raw["VolumeId"],
        state=str(raw.get("State", "")),
        attachments=tuple(
            Attachment(
                str(a.get("InstanceId", "")), str(a.get("Device", "")), str(a.get("State", ""))
            )
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


def created_by(execution_arn: str, run: str) -> dict[str, VolumeView]:
    """Every volume this run of the execution created, found by its tags (a lost CreateVolume
    answer included); never a volume of an earlier run of the same name."""
    pages = (
        clients.ec2()
        .get_paginator("describe_volumes")
        .paginate(
            Filters=[
                {"Name": f"tag:{tags.RESTORE_EXECUTION}", "Values": [execution_arn]},
                {"Name": f"tag:{tags.RESTORE_RUN}", "Values": [run]},
            ]
        )
    )
    return {v["VolumeId"]: view(v) for page in pages for v in page["Volumes"]}


def tagged_with(key: str) -> list[VolumeView]:
    """Every volume that carries the tag ``key``, whatever its value."""
    pages = (
        clients.ec2()
        .get_paginator("describe_volumes")
        .paginate(Filters=[{"Name": "tag-key", "Values": [key]}])
    )
    return [view(raw) for page in pages for raw in page["Volumes"]]


def raw(volume_ids: list[str]) -> dict[str, dict[str, Any]]:
    """DescribeVolumes as EC2 answers it, by volume id (what a new set records of each)."""
    found = clients.ec2().describe_volumes(VolumeIds=volume_ids)["Volumes"]
    return {v["VolumeId"]: dict(v) for v in found}


def sources_being_restored(tag_key: str) -> set[str]:
    """The snapshots that volumes carrying ``tag_key`` are being created from right now."""
    pages = (
        clients.ec2()
        .get_paginator("describe_volumes")
        .paginate(
            Filters=[
                {"Name": "status", "Values": ["creating"]},
                {"Name": "tag-key", "Values": [tag_key]},
            ]
        )
    )
    return {str(v["SnapshotId"]) for page in pages for v in page["Volumes"] if v.get("SnapshotId")}


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
    run: str,
    progress: dict[str, Any],
    *,
    force_after: int,
    keep: Iterable[str] = (),
) -> list[str]:
    """One pass of removing the volumes this run of ``execution_arn`` created, and only those:
    detach what is attached (forcing it once it has been asked ``force_after`` times), delete
    what is detached. ``progress`` keeps ``detachAsks`` and ``deleted`` across passes; returns
    the volumes still on their way (detaching, or still creating). Volumes in ``keep`` are
    left as they are."""
    kept = set(keep)
    asks_by_volume: dict[str, int] = progress.setdefault("detachAsks", {})
    deleted: list[str] = progress.setdefault("deleted", [])
    pending = []
    for vid, view in sorted(views.items()):
        if not owned_by(view, execution_arn, run) or vid in kept:
            continue  # never touch a volume this run did not create, or one it must keep
        found = disposition(view)
        if found in ("attached", "detaching"):
            asks = int(asks_by_volume.get(vid, 0))
            force = asks >= force_after
            if found == "attached" or force:
                for attachment in view.attachments:
                    detach(vid, attachment.instance_id, force=force)
            asks_by_volume[vid] = asks + 1
            pending.append(vid)
        elif found == "creating":
            pending.append(vid)
        elif found == "deletable":
            delete(vid)
            deleted.append(vid)
    return pending
