"""Snapshot sets: one crash-consistent group of snapshots, one per array member.

A set is what its manifest recorded when it was taken (raidsnap.manifests): exactly those
snapshots, by slot. Snapshots that carry raidsnap's tags but that no manifest lists are not part
of any set, whatever their tags say: they are reported as unrecorded and never deleted.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from raidsnap import aws, clients, manifests, tags
from raidsnap.aws import NOT_YET_VISIBLE_WAITS, THROTTLE_CODES, error_code, once_visible
from raidsnap.aws.instances import ArrayInstance, Layout
from raidsnap.errors import SnapshotFailedError
from raidsnap.manifests import Manifest

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import TagSpecificationTypeDef

# A set still "taking" this long after its execution started was abandoned between the record
# of its intent and the record of its snapshots (a backup step retries for minutes, not a day).
ABANDONED_AFTER = timedelta(days=1)
# How far EC2's StartTime of a snapshot may lie before the execution start Step Functions gave.
CLOCK_SLACK = timedelta(minutes=5)
# DescribeSnapshots takes at most this many values in one filter.
_FILTER_VALUES = 200


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
    # The recorded snapshots that exist (for an unrecorded set: the snapshots tagged with it).
    members: tuple[SetMember, ...]
    # None: raidsnap never recorded this set; its snapshots are someone else's.
    manifest: Manifest | None = None
    # Snapshots tagged with this set's id that its manifest does not list.
    strays: tuple[SetMember, ...] = ()

    @property
    def recorded(self) -> bool:
        return self.manifest is not None

    @property
    def degraded(self) -> bool:
        return self.manifest is not None and self.manifest.degraded

    @property
    def missing(self) -> list[int]:
        """Recorded slots whose snapshot no longer exists (or was never taken)."""
        if self.manifest is None:
            return []
        present = {m.index for m in self.members}
        slots = set(self.manifest.snapshots) or set(self.manifest.volumes)
        return sorted(s for s in slots if s not in present)

    @property
    def start_time(self) -> datetime:
        if self.members:
            return min(m.start_time for m in self.members)
        if self.manifest is not None and self.manifest.started is not None:
            return self.manifest.started
        return datetime.min.replace(tzinfo=UTC)

    @property
    def complete(self) -> bool:
        """Recorded and taken, not degraded, and every recorded snapshot (one per slot 0..N-1)
        exists and is completed."""
        m = self.manifest
        if m is None or m.status != "taken" or m.degraded:
            return False
        n = m.member_count
        return (
            n > 0
            and sorted(m.snapshots) == list(range(n))
            and sorted(x.index for x in self.members if x.index is not None) == list(range(n))
            and all(x.state == "completed" for x in self.members)
            and all(self.restorable_tags(x) for x in self.members)
        )

    def restorable_tags(self, member: SetMember) -> bool:
        """The restore may create a volume from a snapshot only while it carries the array and
        set tags its CreateVolume grant requires: one that lost them cannot be restored."""
        return (
            member.tags.get(tags.ARRAY) == self.array
            and member.tags.get(tags.SET_ID) == self.set_id
        )

    def taking(self, now: datetime) -> bool:
        """Its backup recorded the intent but not yet the snapshots, and may still do so."""
        m = self.manifest
        return (
            m is not None
            and m.status == "taking"
            and (m.started is None or now - m.started < ABANDONED_AFTER)
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


@dataclass(frozen=True)
class Listing:
    """An array's recorded sets, and the snapshots that carry its tag but that no set lists."""

    sets: list[SnapshotSet]
    unrecorded: list[SnapshotSet] = field(default_factory=list)

    @property
    def unrecorded_ids(self) -> list[str]:
        ids = {m.snapshot_id for s in self.unrecorded for m in s.members}
        ids |= {m.snapshot_id for s in self.sets for m in s.strays}
        return sorted(ids)


def make_set_id(array: str, started: datetime, execution_arn: str) -> str:
    digest = hashlib.sha256(execution_arn.encode()).hexdigest()[:8]
    return f"{array}-{started:%Y%m%dT%H%M%SZ}-{digest}"


def _member(raw: Mapping[str, Any], index: int | None = None) -> SetMember:
    t = tags.as_dict(raw.get("Tags"))
    if index is None:
        raw_index = t.get(tags.MEMBER_INDEX, "")
        index = int(raw_index) if raw_index.isdigit() else None
    progress = str(raw.get("Progress") or "0%").rstrip("%") or "0"
    return SetMember(
        snapshot_id=raw["SnapshotId"],
        volume_id=raw.get("VolumeId", ""),
        index=index,
        state=raw.get("State", "pending"),
        progress=int(float(progress)),
        start_time=raw["StartTime"],
        size_gib=int(raw.get("VolumeSize", 0)),
        encrypted=bool(raw.get("Encrypted", False)),
        kms_key_id=raw.get("KmsKeyId"),
        state_message=str(raw.get("StateMessage", "")),
        tags=t,
    )


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


def _by_ids(snapshot_ids: Iterable[str]) -> list[dict[str, Any]]:
    """The snapshots that still exist among these (a filter skips the missing ones)."""
    ids = sorted(set(snapshot_ids))
    out: list[dict[str, Any]] = []
    for start in range(0, len(ids), _FILTER_VALUES):
        out += _describe([{"Name": "snapshot-id", "Values": ids[start : start + _FILTER_VALUES]}])
    return out


def of_execution(manifest: Manifest) -> dict[int, dict[str, Any]]:
    """The snapshots a backup took before it could record them: tagged with its execution, of
    a recorded member volume, started no earlier than the execution. Slot -> snapshot."""
    slot_of = {v: k for k, v in manifest.volumes.items()}
    found: dict[int, dict[str, Any]] = {}
    for raw in _describe(
        [{"Name": f"tag:{tags.BACKUP_EXECUTION}", "Values": [manifest.execution_arn]}]
    ):
        slot = slot_of.get(str(raw.get("VolumeId", "")))
        if slot is None:
            continue
        if manifest.started is not None and raw["StartTime"] < manifest.started - CLOCK_SLACK:
            continue
        found[slot] = raw
    return found


def _build(
    found: Iterable[Manifest], tagged: Iterable[Mapping[str, Any]]
) -> tuple[list[SnapshotSet], list[SnapshotSet]]:
    """Sets from their manifests and the snapshots that exist; what is left over is unrecorded,
    grouped by its set id tag ("" when it has none)."""
    found = list(found)
    by_id: dict[str, Mapping[str, Any]] = {str(s["SnapshotId"]): s for s in tagged}
    recorded: dict[str, str] = {}
    wanted: list[str] = []
    for m in found:
        for sid in m.snapshot_ids:
            recorded[sid] = m.set_id
            if sid not in by_id:
                wanted.append(sid)
    # A recorded snapshot that lost the array tag is still the set's.
    for raw in _by_ids(wanted) if wanted else []:
        by_id[str(raw["SnapshotId"])] = raw
    sets = []
    for m in found:
        slots: Mapping[int, Mapping[str, Any]]
        if m.status == "taken":
            slots = {slot: by_id[sid] for slot, sid in m.snapshots.items() if sid in by_id}
        else:
            slots = of_execution(m)
            recorded |= {str(x["SnapshotId"]): m.set_id for x in slots.values()}
        members = tuple(_member(raw, slot) for slot, raw in sorted(slots.items()))
        sets.append(SnapshotSet(m.set_id, m.array, m.member_count, members, m))
    strays: dict[str, list[SetMember]] = defaultdict(list)
    for sid, snapshot in by_id.items():
        if sid not in recorded:
            member = _member(snapshot)
            strays[member.tags.get(tags.SET_ID, "")].append(member)
    out = [replace(s, strays=tuple(strays.pop(s.set_id, []))) for s in sets]
    unrecorded = [_unrecorded(set_id, members) for set_id, members in strays.items()]
    return sorted(out, key=_order), sorted(unrecorded, key=_order)


def _order(s: SnapshotSet) -> tuple[datetime, str]:
    return (s.start_time, s.set_id)


def _unrecorded(set_id: str, members: list[SetMember]) -> SnapshotSet:
    counts = {m.tags.get(tags.MEMBER_COUNT, "") for m in members}
    raw_count = counts.pop() if len(counts) == 1 else ""
    array = next((m.tags.get(tags.ARRAY, "") for m in members), "")
    count = int(raw_count) if raw_count.isdigit() else None
    return SnapshotSet(set_id, array, count, tuple(members), None)


def listing(array: str) -> Listing:
    """Every set raidsnap recorded for the array (oldest first), and the snapshots tagged with
    the array that no set lists."""
    tagged = _describe([{"Name": f"tag:{tags.ARRAY}", "Values": [array]}])
    sets, unrecorded = _build(manifests.of_array(array), tagged)
    return Listing(sets, unrecorded)


def list_sets(array: str) -> list[SnapshotSet]:
    """Every set raidsnap recorded for the array, oldest first."""
    return listing(array).sets


def get_set(array: str, set_id: str) -> SnapshotSet | None:
    """The recorded set; or, when raidsnap never recorded it, the snapshots tagged with its id
    (an unrecorded set, never complete); None when neither exists."""
    tagged = _describe([{"Name": f"tag:{tags.SET_ID}", "Values": [set_id]}])
    manifest = manifests.get(array, set_id)
    sets, unrecorded = _build([manifest] if manifest else [], tagged)
    if sets:
        return sets[0]
    return next((s for s in unrecorded if s.set_id == set_id), None)


def latest_complete(array: str) -> SnapshotSet | None:
    complete = [s for s in list_sets(array) if s.complete]
    return complete[-1] if complete else None


def list_all_sets() -> dict[str, list[SnapshotSet]]:
    """Every recorded set of every array, oldest first per array."""
    tagged = _describe([{"Name": "tag-key", "Values": [tags.ARRAY]}])
    sets, _ = _build(manifests.every(), tagged)
    by_array: dict[str, list[SnapshotSet]] = {}
    for s in sets:
        by_array.setdefault(s.array, []).append(s)
    return by_array


# ---------------------------------------------------------------------- taking a set


@dataclass(frozen=True)
class Taken:
    snapshot_set: SnapshotSet
    consistency: str
    note: str = ""


def create_set(
    *,
    array: str,
    set_id: str,
    execution_arn: str,
    started: datetime,
    instance: ArrayInstance,
    layout: Layout,
    consistency: str,
    volume_facts: Mapping[str, Mapping[str, Any]],
    frozen_until: datetime | None = None,
) -> Taken:
    """Take one multi-volume snapshot of exactly the members, record the set, then tag each
    member's slot.

    CreateSnapshots takes no ClientToken, so the set's intent is recorded first; a retried step
    finds what this execution already took instead of taking a second set. ``frozen_until``: the
    earliest moment the freeze guard may have thawed; snapshots that start after it are not
    filesystem-consistent, and the set is labelled crash."""
    member_ids = {m.volume_id: m for m in layout.members}
    intent = Manifest(
        array=array,
        set_id=set_id,
        execution_arn=execution_arn,
        status="taking",
        member_count=layout.member_count,
        volumes={m.index: m.volume_id for m in layout.members},
        started=started,
        degraded=layout.degraded,
        missing_slots=layout.missing_slots,
        consistency=consistency,
    )
    manifest = manifests.begin(intent)
    if manifest.status == "taken":
        raws = {str(r["SnapshotId"]): r for r in _all_visible(manifest.snapshots.values())}
        snapshots = [(sid, str(raws[sid]["VolumeId"])) for sid in raws]
        return _finish(manifest, snapshots, member_ids, volume_facts)
    earlier = of_execution(manifest)
    if earlier:
        snapshots = [(str(r["SnapshotId"]), str(r["VolumeId"])) for r in earlier.values()]
        starts = [r["StartTime"] for r in earlier.values()]
    else:
        common = {
            tags.ARRAY: array,
            tags.SET_ID: set_id,
            tags.MEMBER_COUNT: str(layout.member_count),
            tags.CONSISTENCY: consistency,
            tags.BACKUP_EXECUTION: execution_arn,
            "Name": f"raidsnap {set_id}",
        }
        if layout.degraded:
            common[tags.DEGRADED] = "true"
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
        starts = [s["StartTime"] for s in response["Snapshots"] if s.get("StartTime")]

    # A volume attached between our look and the call would have been included too: it is
    # not a member, and the snapshot is ours and seconds old, so remove it at once.
    for snapshot_id, volume_id in snapshots:
        if volume_id not in member_ids:
            once_visible(partial(clients.ec2().delete_snapshot, SnapshotId=snapshot_id))
    taken = {volume_id for _, volume_id in snapshots}
    absent = sorted(set(member_ids) - taken)
    if absent:
        raise SnapshotFailedError(
            f"CreateSnapshots did not snapshot members {absent} of {array}; "
            "check that they are still attached to the instance"
        )
    ours = [(sid, vid) for sid, vid in snapshots if vid in member_ids]
    by_slot = {member_ids[vid].index: sid for sid, vid in ours}
    first = min(starts) if starts else started
    label, note = _label(consistency, max(starts) if starts else first, frozen_until)
    manifest = manifests.complete(replace(manifest, consistency=label), by_slot, first)
    return _finish(manifest, ours, member_ids, volume_facts, note)


def _label(
    consistency: str, last_start: datetime, frozen_until: datetime | None
) -> tuple[str, str]:
    """A set is fsfreeze-consistent only if every snapshot started while the guard still held
    the freeze; CreateSnapshots retried through a rate limit may start long after."""
    if consistency != "fsfreeze" or frozen_until is None or last_start <= frozen_until:
        return consistency, ""
    late = (last_start - frozen_until).total_seconds()
    return "crash", (
        f"the snapshots started {late:.0f} s after the freeze guard's deadline "
        f"({frozen_until.isoformat()}), when the filesystem may already have been thawed; "
        "the set is labelled crash-consistent"
    )


def _finish(
    manifest: Manifest,
    snapshots: list[tuple[str, str]],
    member_ids: Mapping[str, Any],
    volume_facts: Mapping[str, Mapping[str, Any]],
    note: str = "",
) -> Taken:
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
            tags.CONSISTENCY: manifest.consistency,
        }
        values = tags.as_list({k: str(v) for k, v in per_member.items() if v not in (None, "")})
        once_visible(partial(clients.ec2().create_tags, Resources=[snapshot_id], Tags=values))  # type: ignore[arg-type]
    # Right after CreateSnapshots a listing may still leave some of them out: look again
    # until every recorded snapshot is there.
    result = get_set(manifest.array, manifest.set_id)
    for wait in NOT_YET_VISIBLE_WAITS:
        if result is not None and len(result.members) >= len(manifest.snapshots):
            break
        aws.pause(wait)
        result = get_set(manifest.array, manifest.set_id)
    if result is None:  # pragma: no cover - EC2 answered CreateSnapshots, so they exist
        raise SnapshotFailedError(
            f"snapshot set {manifest.set_id} vanished right after it was taken"
        )
    return Taken(result, manifest.consistency, note)


def _all_visible(snapshot_ids: Iterable[str]) -> list[dict[str, Any]]:
    """``_by_ids``, looked at again while some of these (just taken) are not listed yet."""
    wanted = set(snapshot_ids)
    found = _by_ids(wanted)
    for wait in NOT_YET_VISIBLE_WAITS:
        if {str(r["SnapshotId"]) for r in found} >= wanted:
            break
        aws.pause(wait)
        found = _by_ids(wanted)
    return found


def _snapshot_tags(values: Mapping[str, str]) -> TagSpecificationTypeDef:
    return {"ResourceType": "snapshot", "Tags": [{"Key": k, "Value": v} for k, v in values.items()]}


# ---------------------------------------------------------------------- deleting a set


@dataclass(frozen=True)
class Refusal:
    """A snapshot EC2 would not delete, and why (in use by an AMI, locked, managed by AWS
    Backup, not ours to delete...)."""

    snapshot_id: str
    code: str
    message: str


def delete_set(snapshot_set: SnapshotSet) -> tuple[list[str], list[Refusal]]:
    """Delete the set's recorded snapshots, and only those; forget the set once none is left.
    Snapshots EC2 refuses to delete are reported, not raised: one snapshot held by an AMI or a
    lock must not stop retention, or fail every later backup. Throttling still raises (the
    workflow retries the step)."""
    if snapshot_set.manifest is None:
        return [], []
    deleted: list[str] = []
    refused: list[Refusal] = []
    for m in snapshot_set.members:
        try:
            clients.ec2().delete_snapshot(SnapshotId=m.snapshot_id)
        except ClientError as err:
            code = error_code(err)
            if code in THROTTLE_CODES:
                raise
            if code != "InvalidSnapshot.NotFound":
                message = str(err.response.get("Error", {}).get("Message", ""))
                refused.append(Refusal(m.snapshot_id, code, message))
                continue
        deleted.append(m.snapshot_id)
    if not refused:
        manifests.forget(snapshot_set.manifest)
    return deleted, refused
