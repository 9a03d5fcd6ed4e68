"""Restore: create the members' volumes, wait for them, detach the old members (replace mode)
and attach the new ones."""

from __future__ import annotations

from raidsnap import tags
from raidsnap.aws import created, instances, kept_fsr, tagging, volumes
from raidsnap.environment import RestoreSettings
from raidsnap.errors import MemberNotIdentifiedError, VolumeFailedError
from raidsnap.models import Poll
from raidsnap.observability import count, for_array
from raidsnap.plan import devices as plan_devices
from raidsnap.plan import tag_limit
from raidsnap.plan import volumes as plan_volumes
from raidsnap.workflows.restore.contracts import (
    Attach,
    AttachCall,
    CheckCall,
    CreateCall,
    DetachCall,
    OldMembers,
    Released,
    Volumes,
)

VOLUME_POLL_SECONDS = 5
VOLUME_BUDGET_SECONDS = 1800
ATTACH_POLL_SECONDS = 3
ATTACH_BUDGET_SECONDS = 600
DETACH_POLL_SECONDS = 5
DETACH_BUDGET_SECONDS = 600


def create_volumes(call: CreateCall, settings: RestoreSettings) -> Volumes:
    """Create every member's volume, in the target's AZ, each with a token derived from the
    execution so that a retried step creates nothing twice; and record each id as the run's own
    the moment CreateVolume answers, before anything else can fail (raidsnap.aws.created: what
    the run's cleanups may delete). A step that fails between the two is retried: CreateVolume
    with the same ClientToken answers the same volume id, which is recorded then. A volume
    whose id the run never recorded is never deleted, only reported."""
    plan = call.plan
    init = plan.initialization
    # How each member goes on: as planned, or prewarm for an FSR member once FSR fell back.
    ways = [call.fsr.used(init.member(m.index)) for m in plan.members]
    ids = []
    dropped: dict[str, tuple[str, ...]] = {}
    for member, way in zip(plan.members, ways, strict=True):
        spec = plan_volumes.VolumeSpec(
            member.index, member.snapshotId, member.volumeType, member.iops, member.throughput
        )
        vid, dropped[member.snapshotId] = volumes.create(
            spec,
            zone=plan.availabilityZone,
            execution_arn=plan.executionArn,
            run=plan.run,
            array=plan.array,
            set_id=plan.setId,
            initialization_rate=init.rate if way == "rate" else None,
            extra_tags=member.tags,
            read_only=plan.readOnly,
        )
        created.record(settings.lock_table, plan.executionArn, plan.run, [vid])
        ids.append(vid)
    for_array(plan.array)
    count("VolumesCreated", len(ids))
    poll = Poll(VOLUME_POLL_SECONDS, VOLUME_BUDGET_SECONDS)
    uniform = len(set(ways)) == 1
    made = Volumes(
        status="creating",
        ids=ids,
        initialization=ways[0] if uniform else "mixed",
        waitSeconds=poll.wait_seconds,
        budgetSeconds=poll.budget_seconds,
        members=ways,
    )
    if copied := tag_limit.note(dropped, onto="the restored volumes"):
        made.notes = [copied]
    warm = [vid for vid, way in zip(ids, ways, strict=True) if way == "prewarm"]
    if warm and not uniform:
        # A mix reads only its prewarm members on the instance. Set only then: the state
        # machine's IsAssembled sends any run whose volumes have the key to Prewarm.
        made.prewarmVolumeIds = warm
    return made


def check_volumes(call: CheckCall, settings: RestoreSettings) -> Volumes:
    """One DescribeVolumes for all members: any in error fails the run; all available ends the
    wait, and then FSR this run enabled is disabled at once (the volumes are made), but for
    pairs the array's fastRestore policy took over since (raidsnap.aws.kept_fsr)."""
    plan, f, v = call.plan, call.fsr, call.volumes.model_copy()
    views = volumes.describe(v.ids)
    failed = [
        f"member {i} {vid} (from {plan.members[i].snapshotId})"
        for i, vid in enumerate(v.ids)
        if vid in views and views[vid].state == "error"
    ]
    if failed:
        raise VolumeFailedError(
            f"volumes ended in error: {', '.join(failed)}. EC2 could not create them from the "
            "snapshots; the run removes what it created. Try again, or another set"
        )
    if all(vid in views and views[vid].state == "available" for vid in v.ids):
        v.status = "available"
        v.fastRestored = [views[vid].fast_restored for vid in v.ids]
        ways = v.members or [v.initialization] * len(v.ids)
        slow = [
            vid
            for vid, fast, way in zip(v.ids, v.fastRestored, ways, strict=True)
            if way == "fsr" and not fast
        ]
        if slow:
            # No volume creation credit was left for these (someone else's volumes spent it, or
            # EC2 was slower than its pace): they are read once on the instance instead.
            v.prewarmVolumeIds = [*(v.prewarmVolumeIds or []), *slow]
            members = [i for i, vid in enumerate(v.ids) if vid in slow]
            v.notes = [
                *v.notes,
                f"members {', '.join(str(i) for i in members)} were created without an FSR "
                "volume creation credit (not "
                "fast restored); they are prewarmed, the other FSR members are fast restored",
            ]
        if f.ours and not f.disabled:
            kept_fsr.disable_unkept(settings.lock_table, plan.array, f.ours, plan.availabilityZone)
            v.fsrDisabled = True
    elif _waited_out(v):
        slow = [vid for vid in v.ids if views.get(vid) and views[vid].state == "creating"]
        raise VolumeFailedError(
            f"volumes {', '.join(slow)} were still creating after {VOLUME_BUDGET_SECONDS} s"
        )
    return v


def _waited_out(progress: Volumes | OldMembers | Attach) -> bool:
    """One more wait comes off the loop's budget; whether the budget is spent."""
    poll = Poll(progress.waitSeconds, progress.budgetSeconds).waited()
    progress.waitSeconds, progress.budgetSeconds = poll.wait_seconds, poll.budget_seconds
    return poll.spent


def _reported_members(call: DetachCall) -> list[Released]:
    """The members the release document verified (its last JSON line's ``members``)."""
    reported = (call.release.result or {}).get("members") or []
    if not isinstance(reported, list):
        return []
    return [Released.model_validate(r) for r in reported if isinstance(r, dict)]


def _gone_members(call: DetachCall, attached: set[str]) -> set[str]:
    """Volumes the set was taken from that are attached to the instance no more, and were not
    replaced by an earlier restore (tagged replaced-by): members that left, as a member does
    when it is detached (or force-detached) after it failed."""
    away = sorted(set(call.plan.sourceVolumeIds) - attached)
    views = volumes.describe(away) if away else {}
    return {vid for vid, view in views.items() if tags.REPLACED_BY not in view.tags}


def _unmapped_members(
    call: DetachCall,
    unaccounted: set[str],
    reported: list[Released],
    notes: list[str],
    gone: set[str],
) -> set[str]:
    """The volumes of members the release document reported without a volume id: their NVMe
    device is gone (the controller dropped off), so the instance cannot read their serial, while
    EC2 still shows them attached. Left attached, such a member comes back at the next boot with
    the array's md UUID. Among the attached volumes nothing else accounts for (not the boot
    volume, not this run's, not a reported member), the members are those the array's record
    names: the volumes this set was taken from (each snapshot's VolumeId, which EC2 sets) and
    the volumes a restore of this array created. When it names more volumes than members are
    unmapped, or fewer while other volumes are attached that could be them, the replace stops
    by name and detaches none of them; fewer with nothing else attached means the rest are no
    longer attached at all."""
    unmapped = [str(r.device) for r in reported if not r.volumeId and r.device]
    if not unmapped:
        return set()
    plan = call.plan
    views = volumes.describe(sorted(unaccounted))
    recorded = set(plan.sourceVolumeIds)
    restored = {
        vid
        for vid, view in views.items()
        if view.tags.get(tags.RESTORED_FROM, "").startswith(f"{plan.array}-")
        and view.tags.get(tags.ARRAY) == plan.array
        and not tags.is_copy(view.tags)
    }
    found = (recorded | restored) & set(views)
    # Fewer named than lost is fine only when the rest are accounted for: members of the record
    # that are attached no more (detached after they failed), or, when nothing else is attached
    # that could be one of them, members no longer attached at all.
    short = len(found) < len(unmapped)
    explained = len(found) + len(gone) >= len(unmapped)
    unsure = len(found) > len(unmapped) or (short and not explained and set(views) - found)
    if unsure:
        raise MemberNotIdentifiedError(
            f"the release document on {plan.targetInstanceId} found members "
            f"{', '.join(unmapped)} of "
            f"{plan.mdDevice} without an EBS volume id (their device is gone), and EC2's "
            f"attachments do not say which volumes they are (unaccounted: "
            f"{sorted(unaccounted)}, of which the array's record names {sorted(found)}). No old "
            "member was detached. Find the volume of each lost member (the EC2 console's "
            "attachments of the instance) and detach it by hand before restoring again, so that "
            "every old member is kept apart from the restored array"
        )
    notes.append(_lost_note(unmapped, found, gone, sorted(set(views) - found)))
    return found


def _lost_note(unmapped: list[str], found: set[str], gone: set[str], others: list[str]) -> str:
    """What the replace did about members the instance could not name, in words."""
    parts = [
        f"release found members {', '.join(unmapped)} without a volume id (their device was gone)"
    ]
    if found:
        parts.append(
            f"EC2 still shows {', '.join(sorted(found))} attached, which the array's record names: "
            "detached with the others as the lost members"
        )
    if len(found) < len(unmapped) and gone:
        parts.append(
            f"the record's {', '.join(sorted(gone))} are attached no more "
            "(detached after they failed)"
        )
    if others:
        parts.append(
            f"also attached and not in the record: {', '.join(others)}; if one of them was a "
            "member (added to the array by hand since the set was taken), it stays attached with "
            "the old array's md UUID, which the restored array does not share, so it cannot join "
            "it"
        )
    return "; ".join(parts)


def detach_old(call: DetachCall) -> OldMembers:
    """Replace mode, after the release document: tag the old members raidsnap:replaced-by, then
    (next call) detach them, kept and never deleted; later calls look until they are detached.

    The old members are exactly the volumes the release document verified on the instance:
    members of the md device it released, whose md UUID it checked, and other attached disks
    whose superblock carries that UUID. A raidsnap tag on a volume, or a volume id recorded
    with an old set, proves nothing about what the volume is now; never the boot volume, never
    a volume this run created."""
    plan = call.plan
    target = plan.targetInstanceId
    if call.old is None:
        instance = instances.describe_instance(target)
        attached = {a.volume_id for a in instance.attachments} - {instance.boot_volume_id}
        ours = set(call.volumes.ids)
        reported = _reported_members(call)
        candidates = {str(r.volumeId or "") for r in reported} - {""}
        notes: list[str] = []
        lost = _unmapped_members(
            call, attached - ours - candidates, reported, notes, _gone_members(call, attached)
        )
        old_ids = sorted(((candidates & attached) | lost) - ours)
        if old_ids:
            # Only tag now: the role may detach only volumes tagged replaced-by, and IAM may
            # not see a tag in the same second it was written. The next look detaches them.
            tagging.add(old_ids, tags.REPLACED_BY, plan.executionArn)
        else:
            notes.append(
                f"the release document verified no old member of md array {plan.mdUuid} "
                f"attached to {target}; nothing was detached"
            )
        poll = Poll(DETACH_POLL_SECONDS, DETACH_BUDGET_SECONDS)
        devices = {a.volume_id: a.device for a in instance.attachments if a.volume_id in old_ids}
        return OldMembers(
            status="detaching" if old_ids else "detached",
            volumeIds=old_ids,
            waitSeconds=poll.wait_seconds,
            budgetSeconds=poll.budget_seconds,
            notes=notes,
            devices=devices,
        )
    old = call.old.model_copy()
    views = volumes.describe(old.volumeIds)
    still = [vid for vid, view in views.items() if view.on(target) is not None]
    for vid in still:
        if not any(a.state == "detaching" for a in views[vid].attachments):
            volumes.detach(vid, target)
    if not still:
        old.status = "detached"
    elif _waited_out(old):
        raise VolumeFailedError(
            f"old members {', '.join(still)} did not detach from {target} within "
            f"{DETACH_BUDGET_SECONDS} s; check the instance, then restore again"
        )
    return old


def attach_volumes(call: AttachCall) -> Attach:
    """First call: tag a new target with the array, if it must be. Then: attach every new volume,
    in member order, to free device names. Later calls: one DescribeVolumes until all are
    attached."""
    plan = call.plan
    target = plan.targetInstanceId
    ids = call.volumes.ids
    a = call.attach.model_copy() if call.attach is not None else None
    views = volumes.describe(ids)
    poll = Poll(ATTACH_POLL_SECONDS, ATTACH_BUDGET_SECONDS)

    def on_target(vid: str) -> plan_volumes.Attachment | None:
        view = views.get(vid)
        return view.on(target) if view else None

    if plan.tagTarget and not (a and a.targetTagged):
        # The new instance becomes the array's: the role attaches only to instances tagged with
        # an array, and IAM may not see a tag in the same second, so attach on the next look.
        tagging.add([target], tags.ARRAY, plan.array)
        return Attach(
            status="attaching",
            targetTagged=True,
            waitSeconds=poll.wait_seconds,
            budgetSeconds=poll.budget_seconds,
        )
    if a is None or not a.devices:
        instance = instances.describe_instance(target)
        need = [vid for vid in ids if on_target(vid) is None]
        names = plan_devices.free_device_names([x.device for x in instance.attachments], len(need))
        devices = {vid: _device_of(on_target(vid)) for vid in ids if vid not in need}
        devices |= dict(zip(need, names, strict=True))
        for vid in need:
            volumes.attach(vid, target, devices[vid])
        update = {
            "status": "attaching",
            "devices": [devices[vid] for vid in ids],
            "waitSeconds": poll.wait_seconds,
            "budgetSeconds": poll.budget_seconds,
        }
        if a is None:
            return Attach.model_validate(update)
        return a.model_copy(update=update)
    pending = []
    for vid, device in zip(ids, a.devices, strict=True):
        found = on_target(vid)
        if found is None:
            volumes.attach(vid, target, device)  # the first request was lost
            pending.append(vid)
        elif found.state != "attached":
            pending.append(vid)
    if not pending:
        a.status = "attached"
    elif _waited_out(a):
        raise VolumeFailedError(
            f"volumes {', '.join(pending)} did not attach to {target} within "
            f"{ATTACH_BUDGET_SECONDS} s"
        )
    return a


def _device_of(attachment: plan_volumes.Attachment | None) -> str:
    return attachment.device if attachment is not None else ""
