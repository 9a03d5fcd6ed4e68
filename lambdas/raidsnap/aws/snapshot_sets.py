"""Reading snapshot sets: the sets raidsnap recorded (their manifests) and the snapshots EC2
has, put together as raidsnap.sets describes them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from raidsnap import clients, tags
from raidsnap.aws import manifests
from raidsnap.sets import (
    CLOCK_SLACK,
    Listing,
    Manifest,
    SetMember,
    SnapshotSet,
    member_of,
    order,
    unrecorded_set,
)

# DescribeSnapshots takes at most this many values in one filter.
_FILTER_VALUES = 200


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


def tagged_with(array: str) -> list[dict[str, Any]]:
    """Every snapshot of this account tagged with the array, as DescribeSnapshots gives it."""
    return _describe([{"Name": f"tag:{tags.ARRAY}", "Values": [array]}])


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
        members = tuple(member_of(raw, slot) for slot, raw in sorted(slots.items()))
        sets.append(SnapshotSet(m.set_id, m.array, m.member_count, members, m))
    strays: dict[str, list[SetMember]] = defaultdict(list)
    for sid, snapshot in by_id.items():
        if sid not in recorded:
            member = member_of(snapshot)
            strays[member.tags.get(tags.SET_ID, "")].append(member)
    out = [replace(s, strays=tuple(strays.pop(s.set_id, []))) for s in sets]
    unrecorded = [unrecorded_set(set_id, members) for set_id, members in strays.items()]
    return sorted(out, key=order), sorted(unrecorded, key=order)


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
    """The newest set ``latest`` restores: complete and restorable by itself (it recorded the
    md UUID; see SnapshotSet.restorable)."""
    return latest_restorable(list_sets(array))


def latest_restorable(sets: list[SnapshotSet]) -> SnapshotSet | None:
    restorable = [s for s in sets if s.restorable]
    return restorable[-1] if restorable else None


def newer_without_md_uuid(sets: list[SnapshotSet], than: SnapshotSet) -> list[SnapshotSet]:
    """Complete sets newer than ``than`` that recorded no md UUID (taken from the volume tags):
    newer data that a restore can use only when told the UUID."""
    return [s for s in sets if s.complete and not s.restorable and s.start_time > than.start_time]


def list_all_sets() -> dict[str, list[SnapshotSet]]:
    """Every recorded set of every array, oldest first per array."""
    tagged = _describe([{"Name": "tag-key", "Values": [tags.ARRAY]}])
    sets, _ = _build(manifests.every(), tagged)
    by_array: dict[str, list[SnapshotSet]] = {}
    for s in sets:
        by_array.setdefault(s.array, []).append(s)
    return by_array
