"""Copies of a set's snapshots, made in this Region from the Region (and account) the set was
taken in: EC2's CopySnapshot, asked of this Region's endpoint (the copy is made where the
request is sent: API reference, CopySnapshot)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from botocore.exceptions import ClientError

from raidsnap import clients, tags
from raidsnap.aws import THROTTLE_CODES, error_code
from raidsnap.aws.snapshot_sets import by_ids
from raidsnap.sets import SetMember, member_of

# "There is a limit of 20 concurrent snapshot copy requests per destination Region. If you exceed
# this quota, you receive a ResourceLimitExceeded error" (Amazon EBS User Guide, "Copy an Amazon
# EBS snapshot", Considerations: https://docs.aws.amazon.com/ebs/latest/userguide/ebs-copy-snapshot.html).
MAX_CONCURRENT_COPIES = 20
COPY_LIMIT_CODE = "ResourceLimitExceeded"
# An EC2 resource carries at most 50 user tags ("Tag your Amazon EC2 resources", restrictions).
MAX_TAGS = 50
_FILTER_VALUES = 200


def _pages(region: str | None, owners: list[str], filters: list[dict[str, Any]]) -> list[Any]:
    pages = (
        clients.ec2(region)
        .get_paginator("describe_snapshots")
        .paginate(OwnerIds=owners, Filters=filters)  # type: ignore[arg-type]
    )
    return [s for page in pages for s in page["Snapshots"]]


def source_snapshots(region: str, account: str, snapshot_ids: Iterable[str]) -> dict[str, Any]:
    """The source snapshots this account can see in their Region, by id: its own, or (another
    account's) those shared with it. A filter leaves out what it cannot see, rather than failing
    the whole call (InvalidSnapshot.NotFound, as DescribeSnapshots by id does)."""
    ids = sorted(set(snapshot_ids))
    found: dict[str, Any] = {}
    for start in range(0, len(ids), _FILTER_VALUES):
        chunk = [{"Name": "snapshot-id", "Values": ids[start : start + _FILTER_VALUES]}]
        for raw in _pages(region, [account], chunk):
            found[str(raw["SnapshotId"])] = raw
    return found


def of_run(execution_arn: str) -> dict[str, SetMember]:
    """The copies this run started here, by the source snapshot they copy (a step retried after
    its CopySnapshot answered, before it recorded the copy, finds it so)."""
    filters = [{"Name": f"tag:{tags.COPY_EXECUTION}", "Values": [execution_arn]}]
    found = (member_of(raw) for raw in _pages(None, ["self"], filters))
    return {m.tags.get(tags.SOURCE_SNAPSHOT, ""): m for m in found}


def in_progress() -> int:
    """Copies raidsnap has under way in this Region, of any array: they count against the
    Region's limit of concurrent copies, as every other copy there does."""
    filters = [
        {"Name": "tag-key", "Values": [tags.COPY_EXECUTION]},
        {"Name": "status", "Values": ["pending"]},
    ]
    return len(_pages(None, ["self"], filters))


def copy_tags(source_tags: Mapping[str, str], own: Mapping[str, str]) -> list[dict[str, str]]:
    """The copy's tags: ``own`` (the set's identity, what it is a copy of, this run), then the
    source's raidsnap facts, then its other tags while there is room; never aws: tags, and never
    the source backup's execution tag (a copy was not taken by that run)."""
    out = dict(own)
    ranked = sorted(
        ((k, v) for k, v in source_tags.items() if not k.startswith("aws:")),
        key=lambda kv: not kv[0].startswith(tags.PREFIX),
    )
    for key, value in ranked:
        if key in out or key == tags.BACKUP_EXECUTION or len(out) >= MAX_TAGS:
            continue
        out[key] = value
    return tags.as_list(out)


def start(
    *,
    source_region: str,
    source_snapshot_id: str,
    description: str,
    snapshot_tags: list[dict[str, str]],
    kms_key_id: str | None,
) -> str | None:
    """Start one copy here; None when the Region's limit of concurrent copies is reached (EC2
    answers ResourceLimitExceeded: a later look starts it). Throttling raises for the workflow
    to retry."""
    params: dict[str, Any] = {
        "SourceRegion": source_region,
        "SourceSnapshotId": source_snapshot_id,
        "Description": description,
        "TagSpecifications": [{"ResourceType": "snapshot", "Tags": snapshot_tags}],
    }
    if kms_key_id:
        # "If KmsKeyId is specified, the encrypted state must be true" (CopySnapshot, KmsKeyId).
        params |= {"Encrypted": True, "KmsKeyId": kms_key_id}
    try:
        # No ClientToken: never retried by the SDK (a lost answer would make a second copy); the
        # step's retry finds the copy by its tags (of_run) before it starts one again.
        return str(clients.ec2(once=True).copy_snapshot(**params)["SnapshotId"])
    except ClientError as err:
        if error_code(err) == COPY_LIMIT_CODE:
            return None
        raise


def look(snapshot_ids: Iterable[str]) -> dict[str, SetMember]:
    """The copies as EC2 has them now, by id (a copy that is gone is left out)."""
    return {str(raw["SnapshotId"]): member_of(raw) for raw in by_ids(snapshot_ids)}


def delete(snapshot_ids: Iterable[str]) -> tuple[list[str], list[str]]:
    """Delete these copies (the ones a failed run recorded as its own); what EC2 refused, with
    why. A copy that is gone already counts as deleted."""
    deleted: list[str] = []
    refused: list[str] = []
    for snapshot_id in sorted(set(snapshot_ids)):
        try:
            clients.ec2().delete_snapshot(SnapshotId=snapshot_id)
        except ClientError as err:
            code = error_code(err)
            if code in THROTTLE_CODES:
                raise
            if code != "InvalidSnapshot.NotFound":
                refused.append(f"{snapshot_id} ({code})")
                continue
        deleted.append(snapshot_id)
    return deleted, refused
