"""Snapshot sets: one crash-consistent group of snapshots, one per array member."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from raidsnap import clients, tags
from raidsnap.arrays import ArrayInstance, Layout
from raidsnap.errors import SnapshotFailedError

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import TagSpecificationTypeDef


@dataclass(frozen=True)
class SetMember:
    snapshot_id: str
    volume_id: str
    index: int | None
    state: str
    progress: int
    start_time: datetime
    size_gib: int
    encrypted: bool
    kms_key_id: str | None
    state_message: str
    tags: Mapping[str, str]


@dataclass(frozen=True)
class SnapshotSet:
    set_id: str
    array: str
    member_count: int | None
    members: tuple[SetMember, ...]

    @property
    def start_time(self) -> datetime:
        return min(m.start_time for m in self.members)

    @property
    def indexes(self) -> list[int | None]:
        return sorted((m.index for m in self.members), key=lambda i: -1 if i is None else i)

    @property
    def complete(self) -> bool:
        """Exactly N snapshots, one per index 0..N-1, all completed."""
        n = self.member_count
        return (
            n is not None
            and len(self.members) == n
            and sorted(m.index for m in self.members if m.index is not None) == list(range(n))
            and all(m.state == "completed" for m in self.members)
        )

    @property
    def pending(self) -> bool:
        return any(m.state == "pending" for m in self.members)

    @property
    def failed(self) -> list[SetMember]:
        return [m for m in self.members if m.state == "error"]

    def by_index(self) -> list[SetMember]:
        return sorted(self.members, key=lambda m: -1 if m.index is None else m.index)

    @property
    def tag_values(self) -> Mapping[str, str]:
        """Tags every member shares (md facts recorded at backup time)."""
        common = dict(self.members[0].tags) if self.members else {}
        for m in self.members[1:]:
            common = {k: v for k, v in common.items() if m.tags.get(k) == v}
        return common


def make_set_id(array: str, started: datetime, execution_arn: str) -> str:
    digest = hashlib.sha256(execution_arn.encode()).hexdigest()[:8]
    return f"{array}-{started:%Y%m%dT%H%M%SZ}-{digest}"


def _member(raw: Mapping[str, Any]) -> SetMember:
    t = tags.as_dict(raw.get("Tags"))
    raw_index = t.get(tags.MEMBER_INDEX, "")
    progress = str(raw.get("Progress") or "0%").rstrip("%") or "0"
    return SetMember(
        snapshot_id=raw["SnapshotId"],
        volume_id=raw.get("VolumeId", ""),
        index=int(raw_index) if raw_index.isdigit() else None,
        state=raw.get("State", "pending"),
        progress=int(float(progress)),
        start_time=raw["StartTime"],
        size_gib=int(raw.get("VolumeSize", 0)),
        encrypted=bool(raw.get("Encrypted", False)),
        kms_key_id=raw.get("KmsKeyId"),
        state_message=str(raw.get("StateMessage", "")),
        tags=t,
    )


def _group(snapshots: Iterable[Mapping[str, Any]]) -> list[SnapshotSet]:
    grouped: dict[str, list[SetMember]] = defaultdict(list)
    arrays: dict[str, str] = {}
    counts: dict[str, int | None] = {}
    for raw in snapshots:
        member = _member(raw)
        set_id = member.tags.get(tags.SET_ID)
        if not set_id:
            continue
        grouped[set_id].append(member)
        arrays[set_id] = member.tags.get(tags.ARRAY, "")
        raw_count = member.tags.get(tags.MEMBER_COUNT, "")
        count = int(raw_count) if raw_count.isdigit() else None
        # Members that disagree on N make the set unusable: record it as unknown.
        counts[set_id] = count if counts.get(set_id, count) == count else None
    sets = [
        SnapshotSet(set_id=s, array=arrays[s], member_count=counts[s], members=tuple(ms))
        for s, ms in grouped.items()
    ]
    return sorted(sets, key=lambda s: (s.start_time, s.set_id))


def _describe(filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    pages = (
        clients.ec2()
        .get_paginator("describe_snapshots")
        .paginate(
            OwnerIds=["self"],
            Filters=filters,  # type: ignore[arg-type]
        )
    )
    return [s for page in pages for s in page["Snapshots"]]  # type: ignore[misc]


def list_sets(array: str) -> list[SnapshotSet]:
    """Every set of the array, oldest first."""
    return _group(_describe([{"Name": f"tag:{tags.ARRAY}", "Values": [array]}]))


def get_set(set_id: str) -> SnapshotSet | None:
    sets = _group(_describe([{"Name": f"tag:{tags.SET_ID}", "Values": [set_id]}]))
    return sets[0] if sets else None


def latest_complete(array: str) -> SnapshotSet | None:
    complete = [s for s in list_sets(array) if s.complete]
    return complete[-1] if complete else None


def _set_for_execution(execution_arn: str) -> list[dict[str, Any]]:
    return _describe([{"Name": f"tag:{tags.BACKUP_EXECUTION}", "Values": [execution_arn]}])


def create_set(
    *,
    array: str,
    set_id: str,
    execution_arn: str,
    instance: ArrayInstance,
    layout: Layout,
    consistency: str,
    volume_facts: Mapping[str, Mapping[str, Any]],
) -> SnapshotSet:
    """Take one multi-volume snapshot of exactly the members, then tag each member's slot.

    CreateSnapshots takes no ClientToken, so a retried step first looks for the set this
    execution already took; only if there is none does it call CreateSnapshots."""
    member_ids = {m.volume_id: m for m in layout.members}
    existing = _set_for_execution(execution_arn)
    if existing:
        snapshots = [(s["SnapshotId"], s["VolumeId"]) for s in existing]
    else:
        common = {
            tags.ARRAY: array,
            tags.SET_ID: set_id,
            tags.MEMBER_COUNT: str(len(layout.members)),
            tags.CONSISTENCY: consistency,
            tags.BACKUP_EXECUTION: execution_arn,
            "Name": f"raidsnap {set_id}",
        }
        md_tags = {
            tags.MD_UUID: layout.md.get("uuid"),
            tags.MD_DEVICE: layout.md.get("device"),
            tags.MD_LEVEL: layout.md.get("level"),
            tags.MD_CHUNK_KIB: layout.md.get("chunkKib"),
            tags.FS_TYPE: layout.md.get("fsType"),
            tags.MOUNT_POINT: layout.md.get("mountPoint"),
        }
        common.update({k: str(v) for k, v in md_tags.items() if v not in (None, "")})
        exclude = sorted(
            a.volume_id
            for a in instance.attachments
            if a.volume_id not in member_ids and a.volume_id != instance.boot_volume_id
        )
        spec: dict[str, Any] = {"InstanceId": instance.instance_id, "ExcludeBootVolume": True}
        if exclude:
            spec["ExcludeDataVolumeIds"] = exclude
        response = clients.ec2().create_snapshots(
            InstanceSpecification=spec,  # type: ignore[arg-type]
            Description=f"raidsnap set {set_id} of array {array}",
            TagSpecifications=[_snapshot_tags(common)],
        )
        snapshots = [(s["SnapshotId"], s["VolumeId"]) for s in response["Snapshots"]]

    # A volume attached between our look and the call would have been included too: it is
    # not a member, and the snapshot is ours and seconds old, so remove it at once.
    for snapshot_id, volume_id in snapshots:
        if volume_id not in member_ids:
            clients.ec2().delete_snapshot(SnapshotId=snapshot_id)

    for snapshot_id, volume_id in snapshots:
        member = member_ids.get(volume_id)
        if member is None:
            continue
        facts = volume_facts.get(volume_id, {})
        # The volume's own tags (cost allocation, owner) follow it; raidsnap's and AWS's do not,
        # a restored member's old set id least of all.
        per_member: dict[str, Any] = {
            k: v
            for k, v in tags.as_dict(facts.get("Tags")).items()
            if not k.startswith((tags.PREFIX, "aws:"))
        }
        per_member |= {
            tags.MEMBER_INDEX: str(member.index),
            tags.SOURCE_VOLUME: volume_id,
            tags.VOLUME_TYPE: facts.get("VolumeType"),
            tags.IOPS: facts.get("Iops"),
            tags.THROUGHPUT: facts.get("Throughput"),
        }
        clients.ec2().create_tags(
            Resources=[snapshot_id],
            Tags=tags.as_list({k: str(v) for k, v in per_member.items() if v not in (None, "")}),  # type: ignore[arg-type]
        )
    taken = {volume_id for _, volume_id in snapshots}
    absent = sorted(set(member_ids) - taken)
    if absent:
        raise SnapshotFailedError(
            f"CreateSnapshots did not snapshot members {absent} of {array}; "
            "check that they are still attached to the instance"
        )
    result = get_set(set_id) if not existing else get_set(_set_id_of(existing))
    if result is None:  # pragma: no cover - EC2 answered CreateSnapshots, so they exist
        raise SnapshotFailedError(f"snapshot set {set_id} vanished right after it was taken")
    return result


def _set_id_of(snapshots: list[dict[str, Any]]) -> str:
    return tags.as_dict(snapshots[0].get("Tags")).get(tags.SET_ID, "")


def _snapshot_tags(values: Mapping[str, str]) -> TagSpecificationTypeDef:
    return {"ResourceType": "snapshot", "Tags": [{"Key": k, "Value": v} for k, v in values.items()]}


def delete_set(snapshot_set: SnapshotSet) -> list[str]:
    deleted = []
    for m in snapshot_set.members:
        clients.ec2().delete_snapshot(SnapshotId=m.snapshot_id)
        deleted.append(m.snapshot_id)
    return deleted


def list_all_sets() -> dict[str, list[SnapshotSet]]:
    """Every raidsnap set of every array (found by the array tag), oldest first per array."""
    by_array: dict[str, list[SnapshotSet]] = {}
    for s in _group(_describe([{"Name": "tag-key", "Values": [tags.ARRAY]}])):
        by_array.setdefault(s.array, []).append(s)
    return by_array
