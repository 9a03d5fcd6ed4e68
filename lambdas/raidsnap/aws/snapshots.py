"""Taking a set (one CreateSnapshots of exactly the members, recorded before and after) and
deleting one; and what a restored volume's snapshot recorded."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from raidsnap import aws, clients, tags
from raidsnap.aws import (
    NOT_YET_VISIBLE_WAITS,
    THROTTLE_CODES,
    error_code,
    lock,
    manifests,
    once_visible,
    snapshot_sets,
)
from raidsnap.aws.instances import ArrayInstance, Layout
from raidsnap.errors import RunStoppedError, SnapshotFailedError
from raidsnap.plan import tag_limit
from raidsnap.sets import Manifest, SnapshotSet

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import CreateSnapshotsResultTypeDef, TagSpecificationTypeDef


def md_uuid_of_volume(volume_id: str) -> str:
    """The md UUID recorded on the snapshot a restored volume was made from ("" if none)."""
    ec2 = clients.ec2()
    (volume,) = ec2.describe_volumes(VolumeIds=[volume_id])["Volumes"]
    snapshot_id = volume.get("SnapshotId")
    if not snapshot_id:
        return ""
    found = ec2.describe_snapshots(SnapshotIds=[snapshot_id])["Snapshots"]
    return tags.as_dict(found[0].get("Tags") if found else None).get(tags.MD_UUID, "")  # type: ignore[arg-type]


# ---------------------------------------------------------------------- taking a set


@dataclass(frozen=True)
class Taken:
    snapshot_set: SnapshotSet
    consistency: str
    notes: tuple[str, ...] = ()


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
    member's slot. CreateSnapshots takes no ClientToken, so the set's intent is recorded first:
    a retried step finds what this execution already took instead of taking a second set.
    ``frozen_until``: the earliest moment the freeze guard may have thawed; snapshots that start
    after it are not filesystem-consistent, and the set is labelled crash."""
    member_ids = {m.volume_id: m for m in layout.members}
    set_keys = frozenset(set_tags(array, set_id, execution_arn, layout, consistency))
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
        md={
            key: str(layout.md[fact])
            for key, fact in (("mountPoint", "mountPoint"), ("device", "device"), ("uuid", "uuid"))
            if layout.md.get(fact)
        },
        instance_id=instance.instance_id,
    )
    manifest = manifests.begin(intent)
    if manifest.status == "taken":
        raws = {str(r["SnapshotId"]): r for r in all_visible(manifest.snapshots.values())}
        snapshots = [(sid, str(raws[sid]["VolumeId"])) for sid in raws]
        return finish(manifest, snapshots, member_ids, volume_facts, set_keys=set_keys)
    earlier = snapshot_sets.of_execution(manifest)
    if earlier:
        snapshots = [(str(r["SnapshotId"]), str(r["VolumeId"])) for r in earlier.values()]
        starts = [r["StartTime"] for r in earlier.values()]
    else:
        refuse_unless_running(execution_arn)
        response = _create_snapshots(
            array, set_id, execution_arn, instance=instance, layout=layout, consistency=consistency
        )
        snapshots = [(s["SnapshotId"], s["VolumeId"]) for s in response["Snapshots"]]
        starts = [s["StartTime"] for s in response["Snapshots"] if s.get("StartTime")]

    ours = members_only(array, snapshots, member_ids)
    by_slot = {member_ids[vid].index: sid for sid, vid in ours}
    first = min(starts) if starts else started
    label, note = consistency_label(consistency, max(starts) if starts else first, frozen_until)
    manifest = manifests.complete(replace(manifest, consistency=label), by_slot, first)
    return finish(manifest, ours, member_ids, volume_facts, set_keys=set_keys, note=note)


def refuse_unless_running(execution_arn: str) -> None:
    """A run stopped by hand (StopExecution) runs no state after it, but the invocation under
    way goes on: a restore the operator starts next may be replacing the members right now.
    DescribeExecution reports the stop (ABORTED) at once (Step Functions API reference,
    StopExecution, DescribeExecution), so the snapshot step asks last thing before it
    snapshots, and takes nothing once its run no longer runs. (A stop between this look and
    CreateSnapshots, well under a second, is not seen.)"""
    now = lock.status(execution_arn)
    if now != "RUNNING":
        raise RunStoppedError(
            f"{execution_arn} is {now}: its snapshot step takes no snapshots (a restore may "
            "be replacing the members)"
        )


def members_only(
    array: str, snapshots: list[tuple[str, str]], member_ids: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """The (snapshot, volume) pairs of members; every member must have one. A volume attached
    between our look and the call would have been included too: it is not a member, and the
    snapshot is ours and seconds old, so it is removed at once."""
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
    return [(sid, vid) for sid, vid in snapshots if vid in member_ids]


def set_tags(
    array: str, set_id: str, execution_arn: str, layout: Layout, consistency: str
) -> dict[str, str]:
    """The tags every snapshot of the set carries: the set, and the md facts discovery gave."""
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
    return common


def _create_snapshots(
    array: str,
    set_id: str,
    execution_arn: str,
    *,
    instance: ArrayInstance,
    layout: Layout,
    consistency: str,
) -> CreateSnapshotsResultTypeDef:
    """One CreateSnapshots of the instance's member volumes, every other volume excluded."""
    members = {m.volume_id for m in layout.members}
    common = set_tags(array, set_id, execution_arn, layout, consistency)
    exclude = sorted(
        a.volume_id
        for a in instance.attachments
        if a.volume_id not in members and a.volume_id != instance.boot_volume_id
    )
    spec: dict[str, Any] = {"InstanceId": instance.instance_id, "ExcludeBootVolume": True}
    if exclude:
        spec["ExcludeDataVolumeIds"] = exclude
    return clients.ec2().create_snapshots(
        InstanceSpecification=spec,  # type: ignore[arg-type]
        Description=f"raidsnap set {set_id} of array {array}",
        TagSpecifications=[snapshot_tags(common)],
    )


def consistency_label(
    consistency: str, last_start: datetime, frozen_until: datetime | None
) -> tuple[str, str]:
    """A set is fsfreeze-consistent only if every snapshot started while the guard still held
    the freeze; CreateSnapshots retried through a rate limit may start long after."""
    # The hooks' hold on the application ends with the same guard (application), so a late
    # snapshot is crash-consistent in either case.
    if consistency not in ("fsfreeze", "application") or frozen_until is None:
        return consistency, ""
    if last_start <= frozen_until:
        return consistency, ""
    late = (last_start - frozen_until).total_seconds()
    return "crash", (
        f"the snapshots started {late:.0f} s after the freeze guard's deadline "
        f"({frozen_until.isoformat()}), when the filesystem may already have been thawed; "
        "the set is labelled crash-consistent"
    )


def finish(
    manifest: Manifest,
    snapshots: list[tuple[str, str]],
    member_ids: Mapping[str, Any],
    volume_facts: Mapping[str, Mapping[str, Any]],
    *,
    set_keys: frozenset[str],
    note: str = "",
) -> Taken:
    dropped = {
        volume_id: tag_member(
            (snapshot_id, volume_id),
            member_ids[volume_id].index,
            volume_facts.get(volume_id, {}),
            manifest.consistency,
            set_keys,
            common={},
        )
        for snapshot_id, volume_id in snapshots
        if volume_id in member_ids
    }
    notes = tuple(n for n in (note, tag_limit.note(dropped, onto="their snapshots")) if n)
    return Taken(listed_set(manifest), manifest.consistency, notes)


def listed_set(manifest: Manifest) -> SnapshotSet:
    """The recorded set as EC2 lists it. Right after CreateSnapshots a listing may still leave
    some of them out: look again until every recorded snapshot is there."""
    result = snapshot_sets.get_set(manifest.array, manifest.set_id)
    for wait in NOT_YET_VISIBLE_WAITS:
        if result is not None and len(result.members) >= len(manifest.snapshots):
            break
        aws.pause(wait)
        result = snapshot_sets.get_set(manifest.array, manifest.set_id)
    if result is None:  # pragma: no cover - EC2 answered CreateSnapshots, so they exist
        raise SnapshotFailedError(
            f"snapshot set {manifest.set_id} vanished right after it was taken"
        )
    return result


def tag_member(
    pair: tuple[str, str],
    index: int,
    facts: Mapping[str, Any],
    consistency: str,
    set_keys: frozenset[str],
    *,
    common: Mapping[str, str],
) -> tuple[str, ...]:
    """Tag one member's snapshot with its slot and the volume's own tags (cost allocation,
    owner), as many of those as fit beside raidsnap's (raidsnap.plan.tag_limit); raidsnap's and
    AWS's own tags of the volume, a restored member's old set id least of all, do not follow it.
    Returns the volume's tags that did not fit."""
    snapshot_id, volume_id = pair
    own: dict[str, Any] = {
        tags.MEMBER_INDEX: str(index),
        tags.SOURCE_VOLUME: volume_id,
        tags.VOLUME_TYPE: facts.get("VolumeType"),
        tags.IOPS: facts.get("Iops"),
        tags.THROUGHPUT: facts.get("Throughput"),
        tags.CONSISTENCY: consistency,
    }
    own = {k: str(v) for k, v in own.items() if v not in (None, "")}
    user = {
        k: v for k, v in tags.as_dict(facts.get("Tags")).items() if not k.startswith(tags.PREFIX)
    }
    fitted = tag_limit.fit(set_keys | set(own), user)
    # One CreateTags per snapshot: it carries all of raidsnap's tags or none of them.
    values = tags.as_list(fitted.kept | dict(common) | own)
    once_visible(partial(clients.ec2().create_tags, Resources=[snapshot_id], Tags=values))  # type: ignore[arg-type]
    return fitted.dropped


def all_visible(snapshot_ids: Iterable[str]) -> list[dict[str, Any]]:
    """``_by_ids``, looked at again while some of these (just taken) are not listed yet."""
    wanted = set(snapshot_ids)
    found = snapshot_sets.by_ids(wanted)
    for wait in NOT_YET_VISIBLE_WAITS:
        if {str(r["SnapshotId"]) for r in found} >= wanted:
            break
        aws.pause(wait)
        found = snapshot_sets.by_ids(wanted)
    return found


def snapshot_tags(values: Mapping[str, str]) -> TagSpecificationTypeDef:
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


def relabel_set(snapshot_ids: list[str], consistency: str) -> None:
    """A set this execution took turns out to have less consistency than its label says (its
    post hook failed): every snapshot's raidsnap:consistency says what it got. (The manifest
    keeps what was recorded when the set was taken: only the function that takes a set writes
    manifests; nothing reads a manifest's consistency, the snapshots' tag is the set's label.)"""
    if snapshot_ids:
        clients.ec2().create_tags(
            Resources=snapshot_ids, Tags=[{"Key": tags.CONSISTENCY, "Value": consistency}]
        )
