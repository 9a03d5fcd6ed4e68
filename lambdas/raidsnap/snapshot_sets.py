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
from typing import Any

from raidsnap import clients, manifests, tags
from raidsnap.manifests import Manifest

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


def by_ids(snapshot_ids: Iterable[str]) -> list[dict[str, Any]]:
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
    for raw in by_ids(wanted) if wanted else []:
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
