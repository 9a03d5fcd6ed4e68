"""Rebuilding set manifests from the snapshots' own tags (``raidsnap sets adopt``), as data.

A set is what its manifest recorded (raidsnap.sets). When the manifest table is lost, or a stack
is deployed afresh with an empty one, the snapshots still carry every tag a set needs: the set
id, each member's slot and the member count, the md facts. This module groups an array's
snapshots by their set id tag and decides, for each group, what would be recorded, or why the
group is refused. A group is refused when its members disagree: anyone allowed to tag snapshots
can write raidsnap's tags, so a manifest is rebuilt only from a group that could have come from
one backup, and only after an operator saw it (the command asks).

What one backup leaves is one CreateSnapshots call: one snapshot per member volume of one
instance, started at one point in time, tagged alike. So every member must be completed, of
this account, hold a distinct slot 0..N-1 of one N, come from a distinct volume (the one EC2
says it was taken of), agree on the md UUID and the other set-wide tags, and have started
within ``MAX_START_SPREAD`` of the others.

A copy of a set made here from another Region or account (raidsnap.workflows.copy) is one
CopySnapshot per member: its VolumeId says nothing ("Snapshots created by the CopySnapshot
action have an arbitrary volume ID that should not be used for any purpose", EC2 API reference,
Snapshot.VolumeId), and its own StartTime is when its copy was started. So a group whose members
say they are copies (``raidsnap:source-account``/``-region``) is judged by what the copy step
tagged them with instead: one distinct source snapshot per member, the source volumes its tags
name distinct, the source snapshots' start times within ``MAX_START_SPREAD``; and its manifest
keeps its origin (``source``), so that it is counted and restored as a copy from there.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from raidsnap import tags
from raidsnap.sets import Manifest, SetMember, member_of
from raidsnap.text import counted

# CreateSnapshots takes the snapshots of all the instance's volumes it names at one point in
# time: "Any attached volumes will produce one snapshot each that is crash-consistent across the
# instance" (EC2 API Reference, CreateSnapshots), "multi-volume snapshots ... point-in-time"
# (Amazon EBS User Guide, "Create Amazon EBS snapshots": "The snapshot is created
# immediately"). AWS gives no spread in seconds: the point in time is taken literally, with one
# second for the rounding of the StartTime each snapshot reports. Members further apart were
# taken by more than one call, and never were one crash-consistent set.
MAX_START_SPREAD = timedelta(seconds=1)

# Tags every member of one set carries with one value (raidsnap.aws.snapshots.set_tags): the
# md facts discovery gave, the consistency, the degraded mark and the backup's execution.
SET_WIDE = (
    tags.MD_UUID,
    tags.MD_LEVEL,
    tags.MD_CHUNK_KIB,
    tags.MD_DEVICE,
    tags.MOUNT_POINT,
    tags.FS_TYPE,
    tags.CONSISTENCY,
    tags.DEGRADED,
    tags.BACKUP_EXECUTION,
    # A copy's origin and the copy run that made it (absent on a set taken here).
    tags.SOURCE_ACCOUNT,
    tags.SOURCE_REGION,
    tags.COPY_EXECUTION,
)


@dataclass(frozen=True)
class Group:
    """The snapshots tagged with one set id, and what adopting them would do: ``manifest`` is
    what would be recorded (None when refused); ``recorded`` the manifest the table already
    holds for this set id, which is never overwritten."""

    set_id: str
    members: tuple[SetMember, ...]
    refusals: tuple[str, ...] = ()
    manifest: Manifest | None = None
    recorded: Manifest | None = None

    @property
    def adoptable(self) -> bool:
        return self.manifest is not None and self.recorded is None and not self.refusals

    @property
    def already_recorded(self) -> bool:
        """The table holds this set exactly as its snapshots say."""
        return (
            self.recorded is not None
            and self.manifest is not None
            and self.recorded.status == "taken"
            and dict(self.recorded.snapshots) == dict(self.manifest.snapshots)
        )

    @property
    def taken_at(self) -> datetime:
        """When the set's data was taken (for a copy, its source's point in time)."""
        if self.manifest is not None and self.manifest.source and self.manifest.started:
            return self.manifest.started
        return min(m.start_time for m in self.members)


@dataclass(frozen=True)
class Review:
    """Every group of one array, oldest first, and the snapshots with no set id at all."""

    array: str
    groups: list[Group]
    without_set_id: list[str] = field(default_factory=list)

    @property
    def adoptable(self) -> list[Group]:
        return [g for g in self.groups if g.adoptable]

    @property
    def refused(self) -> list[Group]:
        """Groups the table does not record that could not come from one backup."""
        return [g for g in self.groups if g.refusals and g.recorded is None]

    @property
    def conflicting(self) -> list[Group]:
        """Groups whose set id the table records otherwise than their snapshots say (the
        record is kept)."""
        return [g for g in self.groups if g.recorded is not None and not g.already_recorded]


def review(
    array: str,
    snapshots: Iterable[Mapping[str, Any]],
    account: str,
    recorded: Mapping[str, Manifest],
    adopted: str,
) -> Review:
    """Group the array's snapshots by set id and judge each group. ``account``: this account's
    id (every member must be its own); ``recorded``: the table's manifests by set id;
    ``adopted``: when and by whom, kept in each manifest written."""
    by_set: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for raw in snapshots:
        by_set[tags.as_dict(raw.get("Tags")).get(tags.SET_ID, "")].append(raw)
    loose = sorted(str(r["SnapshotId"]) for r in by_set.pop("", []))
    groups = [
        _judge(
            array,
            set_id,
            raws=raws,
            account=account,
            recorded=recorded.get(set_id),
            adopted=adopted,
        )
        for set_id, raws in by_set.items()
    ]
    groups.sort(key=lambda g: (g.taken_at, g.set_id))
    return Review(array, groups, loose)


def _judge(
    array: str,
    set_id: str,
    *,
    raws: list[Mapping[str, Any]],
    account: str,
    recorded: Manifest | None,
    adopted: str,
) -> Group:
    members = tuple(sorted((member_of(r) for r in raws), key=_slot_order))
    copied = _is_copy(members)
    starts, unknown = _source_starts(members) if copied else ([m.start_time for m in members], [])
    refusals = [
        *_foreign(raws, account),
        *_not_completed(members),
        *(_copy_sources(members) if copied else _sources(members)),
        *_set_wide(members),
        *unknown,
        *_start_spread(starts),
    ]
    count, count_problem = _member_count(members)
    refusals += count_problem
    degraded = _common(members, tags.DEGRADED) == "true"
    if count is not None:
        refusals += _slots(members, count, degraded=degraded)
    manifest = None
    if not refusals and count is not None:
        manifest = _manifest(
            array, set_id, members=members, count=count, degraded=degraded, adopted=adopted
        )
        if copied:
            manifest = _as_copy(manifest, members, min(starts))
    return Group(set_id, members, tuple(refusals), manifest, recorded)


def _is_copy(members: Iterable[SetMember]) -> bool:
    return any(m.tags.get(tags.SOURCE_ACCOUNT) or m.tags.get(tags.SOURCE_REGION) for m in members)


def _source_starts(members: tuple[SetMember, ...]) -> tuple[list[datetime], list[str]]:
    """The source snapshots' start times a copy carries (raidsnap:source-start-time)."""
    starts: list[datetime] = []
    unknown: list[str] = []
    for m in members:
        raw = m.tags.get(tags.SOURCE_START_TIME, "")
        try:
            starts.append(datetime.fromisoformat(raw.replace("Z", "+00:00")))
        except ValueError:
            unknown.append(
                f"copy {m.snapshot_id} has no usable {tags.SOURCE_START_TIME} tag: when its "
                "source snapshot was taken is unknown"
            )
    return starts, unknown


def _copy_sources(members: tuple[SetMember, ...]) -> list[str]:
    """Each copy of a source snapshot of its own, and of a source volume of its own where its
    tags name one (a copy's VolumeId is arbitrary: EC2 API reference, Snapshot.VolumeId)."""
    out = [
        f"copy {m.snapshot_id} has no {tags.SOURCE_SNAPSHOT} tag"
        for m in members
        if not m.tags.get(tags.SOURCE_SNAPSHOT)
    ]
    for key, what in ((tags.SOURCE_SNAPSHOT, "source snapshot"), (tags.SOURCE_VOLUME, "volume")):
        named = Counter(m.tags[key] for m in members if m.tags.get(key))
        twice = sorted(v for v, n in named.items() if n > 1)
        if twice:
            out.append(f"more than one member is a copy of {what}(s) {', '.join(twice)}")
    return out


def _as_copy(manifest: Manifest, members: tuple[SetMember, ...], started: datetime) -> Manifest:
    """A copy's manifest as the copy workflow records it: its origin, the source set's point in
    time and volumes, the copy run that made it."""
    source = {
        "account": _common(members, tags.SOURCE_ACCOUNT),
        "region": _common(members, tags.SOURCE_REGION),
    }
    volumes = {
        int(m.index): m.tags.get(tags.SOURCE_VOLUME, "") for m in members if m.index is not None
    }
    return replace(
        manifest,
        execution_arn=_common(members, tags.COPY_EXECUTION),
        started=started,
        volumes=volumes,
        source={k: v for k, v in source.items() if v},
    )


def _slot_order(m: SetMember) -> tuple[int, str]:
    return (-1 if m.index is None else m.index, m.snapshot_id)


def _common(members: Iterable[SetMember], key: str) -> str:
    values = {m.tags.get(key, "") for m in members}
    return values.pop() if len(values) == 1 else ""


def _foreign(raws: Iterable[Mapping[str, Any]], account: str) -> list[str]:
    return [
        f"snapshot {r['SnapshotId']} belongs to account {r.get('OwnerId') or 'unknown'}, "
        f"not to this account ({account})"
        for r in raws
        if str(r.get("OwnerId", "")) != account
    ]


def _not_completed(members: Iterable[SetMember]) -> list[str]:
    return [
        f"snapshot {m.snapshot_id} (member {m.index}) is {m.state}, not completed"
        for m in members
        if m.state != "completed"
    ]


def _sources(members: tuple[SetMember, ...]) -> list[str]:
    """Each member of another volume, and the volume EC2 says (VolumeId, which no tag can
    change) where the source-volume tag says one."""
    out = []
    for m in members:
        tagged = m.tags.get(tags.SOURCE_VOLUME)
        if tagged and tagged != m.volume_id:
            out.append(
                f"snapshot {m.snapshot_id} is tagged as taken of {tagged}, but EC2 took it of "
                f"{m.volume_id}"
            )
    twice = sorted(v for v, n in Counter(m.volume_id for m in members).items() if n > 1)
    if twice:
        out.append(f"more than one member was taken of volume(s) {', '.join(twice)}")
    return out


def _set_wide(members: tuple[SetMember, ...]) -> list[str]:
    out = []
    for key in SET_WIDE:
        values = {m.tags.get(key, "") for m in members}
        if len(values) > 1:
            said = "; ".join(
                f"{m.snapshot_id} says {m.tags.get(key) or 'nothing'}" for m in members
            )
            out.append(f"the members disagree on {key} ({said})")
    return out


def _start_spread(starts: list[datetime]) -> list[str]:
    if len(starts) < 2:
        return []
    spread = max(starts) - min(starts)
    if spread <= MAX_START_SPREAD:
        return []
    return [
        f"the members started {spread.total_seconds():.0f} s apart: one CreateSnapshots call "
        "starts all its snapshots at one point in time"
    ]


def _member_count(members: tuple[SetMember, ...]) -> tuple[int | None, list[str]]:
    values = {m.tags.get(tags.MEMBER_COUNT, "") for m in members}
    if len(values) > 1:
        said = "; ".join(f"{m.snapshot_id} says {m.tags.get(tags.MEMBER_COUNT)}" for m in members)
        return None, [f"the members disagree on {tags.MEMBER_COUNT} ({said})"]
    raw = values.pop() if values else ""
    if not raw.isdigit() or int(raw) < 1:
        return None, [f"{tags.MEMBER_COUNT} is {raw or 'missing'}, not a count of members"]
    return int(raw), []


def _slots(members: tuple[SetMember, ...], count: int, *, degraded: bool) -> list[str]:
    """One member per slot 0..count-1; a set taken while the array was degraded misses the
    slots that had no working member, and is recorded so (never restored as latest)."""
    out = [
        f"snapshot {m.snapshot_id} has no usable {tags.MEMBER_INDEX} tag"
        for m in members
        if m.index is None
    ]
    slots = [m.index for m in members if m.index is not None]
    outside = sorted({s for s in slots if s >= count})
    if outside:
        out.append(f"outside 0..{count - 1}: {counted('slot', outside)}")
    for slot, n in sorted(Counter(slots).items()):
        if n > 1:
            ids = [m.snapshot_id for m in members if m.index == slot]
            out.append(f"slot {slot} is claimed by {n} snapshots ({', '.join(ids)})")
    missing = sorted(set(range(count)) - set(slots))
    if missing and not degraded:
        out.append(f"no snapshot for {counted('slot', missing)} of {count}")
    return out


def _manifest(
    array: str,
    set_id: str,
    *,
    members: tuple[SetMember, ...],
    count: int,
    degraded: bool,
    adopted: str,
) -> Manifest:
    """What the backup would have recorded for these snapshots; the instance stays unknown (no
    tag names it, and a tag never moves an array: raidsnap.aws.homes)."""
    md = {
        fact: value
        for fact, key in (
            ("uuid", tags.MD_UUID),
            ("device", tags.MD_DEVICE),
            ("mountPoint", tags.MOUNT_POINT),
        )
        if (value := _common(members, key))
    }
    slots = {int(m.index): m for m in members if m.index is not None}
    return Manifest(
        array=array,
        set_id=set_id,
        execution_arn=_common(members, tags.BACKUP_EXECUTION),
        status="taken",
        member_count=count,
        volumes={slot: m.volume_id for slot, m in slots.items()},
        snapshots={slot: m.snapshot_id for slot, m in slots.items()},
        started=min(m.start_time for m in members),
        degraded=degraded,
        missing_slots=tuple(sorted(set(range(count)) - set(slots))),
        consistency=_common(members, tags.CONSISTENCY) or "crash",
        md=md,
        adopted=adopted,
    )
