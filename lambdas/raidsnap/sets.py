"""Snapshot sets and their manifests, as data: one crash-consistent group of snapshots, one per
array member, and what raidsnap recorded when it took them.

A set is what its manifest recorded when it was taken (raidsnap.aws.manifests): exactly those
snapshots, by slot. Snapshots that carry raidsnap's tags but that no manifest lists are not part
of any set, whatever their tags say: they are reported as unrecorded and never deleted. Reading
sets from EC2 and DynamoDB is raidsnap.aws.snapshot_sets's.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from raidsnap import tags
from raidsnap.models import MD_UUID_PATTERN

# A set still "taking" this long after its execution started was abandoned between the record
# of its intent and the record of its snapshots (a backup step retries for minutes, not a day).
ABANDONED_AFTER = timedelta(days=1)
# How far EC2's StartTime of a snapshot may lie before the execution start Step Functions gave.
CLOCK_SLACK = timedelta(minutes=5)
Status = Literal["taking", "taken"]


@dataclass(frozen=True)
class Manifest:
    array: str
    set_id: str
    execution_arn: str
    status: Status
    member_count: int
    # slot -> volume id, as discovery (or the volume tags) gave them when the set was taken
    volumes: Mapping[int, str]
    # slot -> snapshot id, once CreateSnapshots answered
    snapshots: Mapping[int, str] = field(default_factory=dict)
    started: datetime | None = None
    degraded: bool = False
    missing_slots: tuple[int, ...] = ()
    consistency: str = "crash"
    # What discovery said of the array when the set was taken (mountPoint, device, uuid):
    # unlike the snapshots' tags, which anyone allowed to tag snapshots can change, only the
    # backup's own functions write this, so a restore's safety decisions rest on it.
    md: Mapping[str, str] = field(default_factory=dict)
    # The instance the set was taken from: the array's recorded instance (raidsnap.homes) as
    # of this set, which a tag alone never moves.
    instance_id: str = ""
    # Set when the manifest was rebuilt from the snapshots' tags (``raidsnap sets adopt``)
    # rather than written by the backup that took the set: when, and who confirmed it.
    adopted: str = ""

    @property
    def snapshot_ids(self) -> set[str]:
        return set(self.snapshots.values())


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
    def recorded_md(self) -> Mapping[str, str]:
        """The md facts the backup recorded in the manifest (empty for sets taken before it
        did, and for sets taken from the volume tags)."""
        return dict(self.manifest.md) if self.manifest is not None else {}

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

    @property
    def md_uuid(self) -> str | None:
        """The md UUID every member's snapshot recorded (discovery's), None when they did not
        record one (a set taken from the volume tags while the agent was offline)."""
        found = self.tag_values.get(tags.MD_UUID, "")
        return found if re.fullmatch(MD_UUID_PATTERN, found) else None

    @property
    def restorable(self) -> bool:
        """Complete, and restorable without an operator's help: the assemble document finds
        the members by the md UUID the set recorded. A complete set without one can still be
        restored by hand (the input's mdUuid), so it is kept as a set, but it is never what
        retention counts as kept, what "latest" restores, nor the newest set of the RPO."""
        return self.complete and self.md_uuid is not None

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


def member_of(raw: Mapping[str, Any], index: int | None = None) -> SetMember:
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


def order(s: SnapshotSet) -> tuple[datetime, str]:
    return (s.start_time, s.set_id)


def unrecorded_set(set_id: str, members: list[SetMember]) -> SnapshotSet:
    counts = {m.tags.get(tags.MEMBER_COUNT, "") for m in members}
    raw_count = counts.pop() if len(counts) == 1 else ""
    array = next((m.tags.get(tags.ARRAY, "") for m in members), "")
    count = int(raw_count) if raw_count.isdigit() else None
    return SnapshotSet(set_id, array, count, tuple(members), None)
