"""Taking the sets of several arrays of one instance at one point in time: one CreateSnapshots of
every member of every named array, each array's set tagged and recorded as its own.

CreateSnapshots tags every snapshot it takes alike (TagSpecifications). Its grant requires the
array tag on the new snapshots, and later CreateTags and DeleteSnapshot require the array and
set tags on them (lib/constructs/permissions.ts), so the call gives every snapshot the group's
own values, the arrays' and the set ids' names joined by "+" (a character no array name or set
id has: no array's set ever lists them), and the execution tag that finds them again after a lost
answer. Each member's snapshot then gets its array's tags in one CreateTags (array, set id,
slot: all or none), and only once every array's snapshots carry theirs are the manifests
recorded as taken: a set whose tagging stopped partway is never complete. A tagging error that
is not throttling deletes the snapshots this run took (its execution's, of its recorded
volumes) and records no set; throttling is raised for the step's Retry, whose run finds the same
snapshots and tags them again."""

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
from raidsnap.plan import tag_limit
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
    recorded = {
        p.array: manifests.begin(_intent(p, execution_arn, started, instance.instance_id))
        for p in ordered
    }
    found = [taken for m in recorded.values() for taken in _earlier(m)]
    if not found:
        found = _take(ordered, execution_arn, instance)
    starts = [start for _, _, start in found]
    every_member: dict[str, Member] = {m.volume_id: m for p in ordered for m in p.layout.members}
    # Snapshots of volumes no array names are deleted here, once for the group.
    ours = snapshots.members_only(
        "+".join(recorded),
        sorted({(sid, vid) for sid, vid, _ in found}),
        every_member,
    )
    first = min(starts, default=started)
    labels = {
        p.array: snapshots.consistency_label(
            p.consistency, max(starts, default=first), p.frozen_until
        )
        for p in ordered
    }
    try:
        dropped = {
            p.array: _tag(p, recorded[p.array], ours, labels[p.array][0], volume_facts)
            for p in ordered
        }
    except ClientError as err:
        if error_code(err) in THROTTLE_CODES:
            raise
        _delete_taken(ours)
        raise SnapshotFailedError(
            f"the sets of {', '.join(recorded)} could not be tagged ({error_code(err)}: "
            f"{err.response.get('Error', {}).get('Message', '')}); the {len(ours)} snapshots "
            "this run took were deleted and no set was recorded"
        ) from None
    return {
        p.array: _record(
            p,
            recorded[p.array],
            ours=ours,
            first=first,
            label=labels[p.array],
            dropped=dropped[p.array],
        )
        for p in ordered
    }


def _record(
    part: Part,
    manifest: Manifest,
    *,
    ours: list[tuple[str, str]],
    first: datetime,
    label: tuple[str, str],
    dropped: Mapping[str, tuple[str, ...]],
) -> Taken:
    """Record the array's snapshots as its set (once every array's are tagged)."""
    if manifest.status != "taken":
        slot = {m.volume_id: m.index for m in part.layout.members}
        by_slot = {slot[vid]: sid for sid, vid in ours if vid in slot}
        manifest = manifests.complete(replace(manifest, consistency=label[0]), by_slot, first)
    notes = tuple(n for n in (label[1], tag_limit.note(dropped, onto="their snapshots")) if n)
    return Taken(snapshots.listed_set(manifest), manifest.consistency, notes)


def _take(
    ordered: Sequence[Part], execution_arn: str, instance: ArrayInstance
) -> list[tuple[str, str, datetime]]:
    """The one CreateSnapshots: (snapshot, volume, start) of each snapshot it took; as for one
    array's set, none once the run was stopped by hand (snapshots.refuse_unless_running)."""
    snapshots.refuse_unless_running(execution_arn)
    spec = instance_specification(
        instance, [m.volume_id for p in ordered for m in p.layout.members]
    )
    group = {
        tags.ARRAY: "+".join(p.array for p in ordered),
        tags.SET_ID: "+".join(p.set_id for p in ordered),
        tags.BACKUP_EXECUTION: execution_arn,
    }
    response = clients.ec2().create_snapshots(
        InstanceSpecification=spec,  # type: ignore[arg-type]
        Description=f"raidsnap sets of {', '.join(p.array for p in ordered)}",
        TagSpecifications=[snapshots.snapshot_tags(group)],
    )
    return [(s["SnapshotId"], s["VolumeId"], s["StartTime"]) for s in response["Snapshots"]]


def _tag(
    part: Part,
    manifest: Manifest,
    ours: list[tuple[str, str]],
    consistency: str,
    volume_facts: Mapping[str, Mapping[str, Any]],
) -> dict[str, tuple[str, ...]]:
    """Give each of the array's snapshots its set's tags and its slot in one CreateTags;
    volume -> the volume's own tags that did not fit."""
    if manifest.status == "taken":
        consistency = manifest.consistency
    common = snapshots.set_tags(
        part.array, part.set_id, manifest.execution_arn, part.layout, consistency
    )
    member_ids = {m.volume_id: m for m in part.layout.members}
    return {
        vid: snapshots.tag_member(
            (sid, vid),
            member_ids[vid].index,
            volume_facts.get(vid, {}),
            consistency,
            frozenset(common),
            common=common,
        )
        for sid, vid in ours
        if vid in member_ids
    }


def _earlier(manifest: Manifest) -> list[tuple[str, str, datetime]]:
    """What this execution already took for the array, (snapshot, volume, start): the recorded
    snapshots once taken, else those the execution's tag finds of its recorded volumes."""
    if manifest.status == "taken":
        raws = snapshots.all_visible(manifest.snapshots.values())
    else:
        raws = list(snapshot_sets.of_execution(manifest).values())
    return [(str(r["SnapshotId"]), str(r["VolumeId"]), r["StartTime"]) for r in raws]


def _delete_taken(ours: list[tuple[str, str]]) -> None:
    """Delete the snapshots this run took (each of a volume it recorded, found by its answer or
    its execution's tag), and nothing else; one already gone is fine."""
    ec2 = clients.ec2()
    for snapshot_id, _ in ours:
        try:
            ec2.delete_snapshot(SnapshotId=snapshot_id)
        except ClientError as err:
            if error_code(err) != "InvalidSnapshot.NotFound":
                raise
