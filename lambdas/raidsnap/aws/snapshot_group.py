"""Taking the sets of several arrays of one instance at one point in time: one CreateSnapshots of
every member of every named array, each array's set recorded and tagged as its own.

CreateSnapshots tags every snapshot it takes alike (TagSpecifications), so it gives them only
what the arrays share (the execution, which finds them again after a lost answer); each array's
tags (``raidsnap:array``, its set id, each member's slot) go on with CreateTags once the array's
manifest records its snapshots. A set is complete only when every member carries its array and
set tags (raidsnap.sets.SnapshotSet.complete), so a set whose tagging stopped partway is never
restored; a tagging error that is not throttling deletes every snapshot this run recorded and
forgets the group's sets, so nothing half-tagged stays behind. Throttling is raised as it is:
the step is retried, finds the recorded sets and tags them again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from raidsnap import clients, tags
from raidsnap.aws import THROTTLE_CODES, error_code, manifests, snapshot_sets, snapshots
from raidsnap.aws.instances import ArrayInstance, Layout, Member
from raidsnap.aws.snapshots import Taken
from raidsnap.errors import InvalidInputError, SnapshotFailedError
from raidsnap.sets import Manifest

# InstanceSpecification.ExcludeDataVolumeIds: "You can specify up to 40 volume IDs per request"
# (Amazon EC2 API Reference, InstanceSpecification). The boot volume is never in the list: "If
# you specify the ID of the root volume, the request fails. To exclude the root volume, use
# ExcludeBootVolume."
MAX_EXCLUDED_VOLUMES = 40


@dataclass(frozen=True)
class Part:
    """One array of the group: its set id, what discovery found, the consistency asked for and
    the moment its freeze guard may have thawed (None: no freeze)."""

    array: str
    set_id: str
    layout: Layout
    consistency: str
    frozen_until: datetime | None = None


def instance_specification(instance: ArrayInstance, members: Sequence[str]) -> dict[str, Any]:
    """Exactly ``members`` of the instance: the boot volume by ExcludeBootVolume, every other
    attached volume by ExcludeDataVolumeIds. Refused when more than EC2's 40 volumes would need
    excluding: the call would fail, or take more than was asked for."""
    wanted = set(members)
    if not wanted:
        raise InvalidInputError("arrays", "no member volumes to snapshot")
    boot = instance.boot_volume_id
    if boot in wanted:
        raise InvalidInputError("arrays", f"{boot} is the boot volume of {instance.instance_id}")
    exclude = sorted(
        a.volume_id for a in instance.attachments if a.volume_id not in wanted | {boot}
    )
    if len(exclude) > MAX_EXCLUDED_VOLUMES:
        raise InvalidInputError(
            "arrays",
            f"one CreateSnapshots of {instance.instance_id} would have to exclude "
            f"{len(exclude)} volumes that are not members; EC2 takes at most "
            f"{MAX_EXCLUDED_VOLUMES}. Back the arrays up one by one",
        )
    spec: dict[str, Any] = {"InstanceId": instance.instance_id, "ExcludeBootVolume": True}
    if exclude:
        spec["ExcludeDataVolumeIds"] = exclude
    return spec


def _check(parts: Sequence[Part]) -> None:
    arrays = [p.array for p in parts]
    if len(set(arrays)) != len(arrays) or len(arrays) < 2:
        raise InvalidInputError("arrays", f"two or more different arrays are needed, not {arrays}")
    seen: dict[str, str] = {}
    for part in parts:
        for m in part.layout.members:
            if m.volume_id in seen:
                raise InvalidInputError(
                    "arrays",
                    f"volume {m.volume_id} is a member of both "
                    f"{seen[m.volume_id]} and {part.array}",
                )
            seen[m.volume_id] = part.array


def _intent(part: Part, execution_arn: str, started: datetime, instance_id: str) -> Manifest:
    layout = part.layout
    return Manifest(
        array=part.array,
        set_id=part.set_id,
        execution_arn=execution_arn,
        status="taking",
        member_count=layout.member_count,
        volumes={m.index: m.volume_id for m in layout.members},
        started=started,
        degraded=layout.degraded,
        missing_slots=layout.missing_slots,
        consistency=part.consistency,
        md={
            key: str(layout.md[key])
            for key in ("mountPoint", "device", "uuid")
            if layout.md.get(key)
        },
        instance_id=instance_id,
    )


def create_sets(
    *,
    parts: Sequence[Part],
    execution_arn: str,
    started: datetime,
    instance: ArrayInstance,
    volume_facts: Mapping[str, Mapping[str, Any]],
) -> dict[str, Taken]:
    """Take every part's set with one CreateSnapshots; array -> what was taken. A retried step
    takes nothing twice: each array's intent is recorded before the call, and what the call
    took is found again by the execution's tag and the recorded volumes."""
    _check(parts)
    ordered = sorted(parts, key=lambda p: p.array)
    recorded = [
        manifests.begin(_intent(p, execution_arn, started, instance.instance_id)) for p in ordered
    ]
    found = {m.array: _earlier(m) for m in recorded}
    starts: list[datetime] = []
    if not any(found.values()):
        spec = instance_specification(
            instance, [m.volume_id for p in ordered for m in p.layout.members]
        )
        response = clients.ec2().create_snapshots(
            InstanceSpecification=spec,  # type: ignore[arg-type]
            Description=f"raidsnap sets of {', '.join(p.array for p in ordered)}",
            TagSpecifications=[snapshots.snapshot_tags({tags.BACKUP_EXECUTION: execution_arn})],
        )
        taken = [(s["SnapshotId"], s["VolumeId"]) for s in response["Snapshots"]]
        starts = [s["StartTime"] for s in response["Snapshots"] if s.get("StartTime")]
        found = {p.array: taken for p in ordered}
    every_member: dict[str, Member] = {m.volume_id: m for p in ordered for m in p.layout.members}
    # Snapshots of volumes no array names are deleted here, once (not per array).
    ours = snapshots.members_only(
        "+".join(p.array for p in ordered),
        sorted({pair for pairs in found.values() for pair in pairs}),
        every_member,
    )
    manifests_by_array = {m.array: m for m in recorded}
    out: dict[str, Taken] = {}
    try:
        for part in ordered:
            out[part.array] = _record_and_tag(
                part,
                manifests_by_array[part.array],
                ours=ours,
                starts=starts,
                started=started,
                volume_facts=volume_facts,
            )
    except ClientError as err:
        if error_code(err) in THROTTLE_CODES:
            raise
        _undo(ordered, execution_arn)
        raise SnapshotFailedError(
            f"the sets of {', '.join(p.array for p in ordered)} could not be tagged "
            f"({error_code(err)}: {err.response.get('Error', {}).get('Message', '')}); "
            "every snapshot this run took was deleted and no set was kept"
        ) from None
    return out


def _earlier(manifest: Manifest) -> list[tuple[str, str]]:
    """What this execution already took for the array: the recorded snapshots once taken, else
    those the execution's tag finds of its recorded volumes."""
    if manifest.status == "taken":
        raws = snapshots.all_visible(manifest.snapshots.values())
    else:
        raws = list(snapshot_sets.of_execution(manifest).values())
    return [(str(r["SnapshotId"]), str(r["VolumeId"])) for r in raws]


def _record_and_tag(
    part: Part,
    manifest: Manifest,
    *,
    ours: list[tuple[str, str]],
    starts: list[datetime],
    started: datetime,
    volume_facts: Mapping[str, Mapping[str, Any]],
) -> Taken:
    member_ids = {m.volume_id: m for m in part.layout.members}
    mine = [(sid, vid) for sid, vid in ours if vid in member_ids]
    common = snapshots.set_tags(
        part.array, part.set_id, manifest.execution_arn, part.layout, part.consistency
    )
    note = ""
    if manifest.status != "taken":
        first = min(starts) if starts else started
        label, note = snapshots.consistency_label(
            part.consistency, max(starts) if starts else first, part.frozen_until
        )
        by_slot = {member_ids[vid].index: sid for sid, vid in mine}
        manifest = manifests.complete(replace(manifest, consistency=label), by_slot, first)
    common[tags.CONSISTENCY] = manifest.consistency
    return snapshots.finish(
        manifest,
        mine,
        member_ids,
        volume_facts,
        set_keys=frozenset(common),
        note=note,
        common=common,
    )


def _undo(parts: Sequence[Part], execution_arn: str) -> None:
    """Delete what this run recorded for each array of the group, and only that: the recorded
    snapshots of its taken sets, or the snapshots its execution tag finds of a set still being
    recorded."""
    for part in parts:
        manifest = manifests.get(part.array, part.set_id)
        if manifest is None or manifest.execution_arn != execution_arn:
            continue
        snapshot_set = snapshot_sets.get_set(part.array, part.set_id)
        if snapshot_set is not None and snapshot_set.manifest is not None:
            snapshots.delete_set(snapshot_set)
