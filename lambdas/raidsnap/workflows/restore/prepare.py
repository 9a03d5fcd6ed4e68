"""Restore, first step: validate the input, resolve set, target and AZ, check the agent, take
the lock. Nothing in EC2 or SSM changes here: every refusal happens before the first change."""

from __future__ import annotations

import uuid
from datetime import UTC

from pydantic import JsonValue

from raidsnap import tags
from raidsnap.aws import homes, instances, lock, run_secret, snapshot_sets
from raidsnap.environment import RestoreSettings, allowed_mount_points
from raidsnap.errors import (
    ArrayNotFoundError,
    InstanceNotReadyError,
    InvalidInputError,
    RaidsnapError,
)
from raidsnap.models import RestoreInput, parse_restore_input
from raidsnap.observability import logger
from raidsnap.plan import devices as plan_devices
from raidsnap.plan import targets as plan_targets
from raidsnap.plan import volumes as plan_volumes
from raidsnap.sets import SnapshotSet
from raidsnap.workflows.restore import identity
from raidsnap.workflows.restore import initialization as initialization_plan
from raidsnap.workflows.restore.contracts import Member, Plan, PrepareCall
from raidsnap.workflows.restore.set_choice import resolve_set


def prepare(call: PrepareCall, settings: RestoreSettings) -> Plan:
    """Validate the input, resolve set, target and AZ, check the agent, take the lock.

    Nothing in EC2 or SSM changes here: every refusal happens before the first change."""
    request = parse_restore_input(call.input)
    execution_arn = call.execution.id
    started = call.execution.startTime
    # Without the context object's start time (a hand invocation) the run still gets a nonce
    # of its own; only the clean-up after a stopped run could not find its volumes then.
    run = run_secret.nonce(execution_arn, str(started)) if started else uuid.uuid4().hex[:16]
    return _plan(request, settings, execution_arn, run, take_lock=True)


def preview(raw_input: JsonValue, settings: RestoreSettings) -> Plan:
    """The plan Prepare would make for this input now, for a person to read before the run
    starts (the CLI shows it and asks): the same checks, refusals and choices, by the same code,
    changing nothing anywhere. The lock is not taken, but what taking it would refuse is checked
    (a running restore, a backup's hold, copies next to the array); a move the configuration
    implies is not recorded; there is no run yet, so its execution ARN and nonce are empty."""
    request = parse_restore_input(raw_input)
    return _plan(request, settings, "", "", take_lock=False)


def _plan(
    request: RestoreInput,
    settings: RestoreSettings,
    execution_arn: str,
    run: str,
    *,
    take_lock: bool,
) -> Plan:
    notes: list[str] = []
    snapshot_set = resolve_set(request, notes)
    target, tag_target, target_tag = _resolve_target(
        request, settings.lock_table, notes, record=take_lock
    )
    _refuse_replace_elsewhere(request, target, target_tag)
    logger.append_keys(array=request.array, set_id=snapshot_set.set_id)
    _refuse_unready_agent(target.instance_id)
    members = plan_volumes.member_specs(request, snapshot_set, notes)
    md_uuid = plan_volumes.md_uuid(request, snapshot_set)
    new_md_uuid = _new_md_uuid(request, md_uuid)
    live = identity.live_md_uuid(request.array, target) if request.mode == "replace" else ""
    mount_point, own_mount_point = plan_volumes.mount_point(request, snapshot_set, notes)
    if not own_mount_point:  # a replace puts the array back where the instance released it
        own = target_tag == request.array or tag_target
        _refuse_unallowed_mount_point(request, mount_point, snapshot_set, own_target=own)
    initialization = initialization_plan.decide(request, settings, target, members, notes)
    if take_lock:
        _take_lock(
            request,
            settings,
            execution_arn=execution_arn,
            snapshot_set=snapshot_set,
            target=target,
            notes=notes,
        )
    else:
        _refuse_what_the_lock_would(request, settings, snapshot_set, target)
    # After the lock, as always: its note comes before the device's in the output.
    md_device = plan_devices.md_device(request.mdDevice, _recorded_md_device(snapshot_set), notes)
    return Plan(
        array=request.array,
        setId=snapshot_set.set_id,
        executionArn=execution_arn,
        run=run,
        setTakenAt=snapshot_set.start_time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        targetInstanceId=target.instance_id,
        availabilityZone=target.availability_zone,
        tagTarget=tag_target,
        mode=request.mode,
        mdDevice=md_device,
        mdUuid=md_uuid,
        newMdUuid=new_md_uuid,
        liveMdUuid=live,
        mountPoint=mount_point,
        ownMountPoint=own_mount_point,
        readOnly=request.readOnly,
        initialization=initialization,
        members=[Member.model_validate(m) for m in members],
        sourceVolumeIds=[m.volume_id for m in snapshot_set.by_index()],
        notes=notes,
    )


def _new_md_uuid(request: RestoreInput, md_uuid: str) -> str:
    """The identity the restored array gets: the caller's (never the set's own), else a new one."""
    if request.newMdUuid == md_uuid:
        raise InvalidInputError(
            "newMdUuid",
            f"{md_uuid} is the set's own md UUID: a restored array never shares it with the "
            "array its set came from. Give another, or none (the run chooses one)",
        )
    return request.newMdUuid or identity.new_md_uuid()


def _refuse_replace_elsewhere(
    request: RestoreInput, target: instances.ArrayInstance, target_tag: str | None
) -> None:
    if request.mode == "replace" and target_tag != request.array:
        raise InvalidInputError(
            "mode",
            f"replace releases the array on the instance that holds it, but {target.instance_id} "
            f"is not tagged {tags.ARRAY}={request.array}; use mode attach",
        )


def _refuse_unallowed_mount_point(
    request: RestoreInput, mount_point: str, snapshot_set: SnapshotSet, *, own_target: bool
) -> None:
    """A restored array is mounted only under the allowed directories (allowedMountPoints in the
    configuration), or where its own set's manifest recorded it: not wherever a restore input
    or a snapshot tag says. A directory such as /var/lib/cloud/scripts/per-boot is no system
    tree, but whatever a filesystem mounted there holds runs as root at the next boot. The
    recorded place counts only on the array's own instance: a copy restored elsewhere must not
    take a place the array's instance chose for itself (``own_target``)."""
    allowed = allowed_mount_points() or list(plan_targets.DEFAULT_ALLOWED_MOUNT_POINTS)
    recorded = snapshot_set.recorded_md.get("mountPoint") if own_target else None
    if plan_targets.mount_point_allowed(mount_point, request.array, allowed, recorded):
        return
    places = ", ".join(a.replace("<array>", request.array) for a in allowed)
    source = (
        ""
        if request.mountPoint is not None
        else f" (no mountPoint was given; set {snapshot_set.set_id} names it)"
    )
    own = (
        f", or be the mount point set {snapshot_set.set_id} recorded ({recorded or 'none'})"
        if own_target
        else " (a copy on another instance never takes the place the array's own set recorded)"
    )
    raise InvalidInputError(
        "mountPoint",
        f"{mount_point!r}{source} is not a place raidsnap mounts a restored array: it must lie "
        f"under {places}{own}. Choose one there, or add the directory to allowedMountPoints "
        "in the configuration. Nothing was changed",
    )


def _recorded_md_device(snapshot_set: SnapshotSet) -> str:
    """The md device the set was taken from: the backup's own record first, the tag (anyone's
    who may tag snapshots) only for sets recorded before it kept one."""
    return snapshot_set.recorded_md.get("device") or snapshot_set.tag_values.get(tags.MD_DEVICE, "")


def _refuse_unready_agent(instance_id: str) -> None:
    agent = instances.agent(instance_id)
    if not agent.online:
        raise InstanceNotReadyError(
            f"the SSM agent of {instance_id} is not online, so the array cannot be "
            "assembled there; start the instance or fix its agent (and its instance profile), "
            "then restore again. Nothing was changed"
        )
    if agent.too_old:
        raise InstanceNotReadyError(
            f"{agent.too_old_reason()}, so the array cannot be assembled there; then restore "
            "again. Nothing was changed"
        )


def _take_lock(
    request: RestoreInput,
    settings: RestoreSettings,
    *,
    execution_arn: str,
    snapshot_set: SnapshotSet,
    target: instances.ArrayInstance,
    notes: list[str],
) -> None:
    set_id = snapshot_set.set_id
    taken_over = lock.acquire(
        settings.lock_table,
        request.array,
        execution_arn,
        set_id,
        settings.lock_lease_seconds,
    )
    # Checked under the lock, so that a restore already running answers RestoreInProgress
    # first; a refusal here (BackupInProgress among them) gives the lock back and changes
    # nothing else.
    try:
        # After the lock is written: a backup writes its hold before it looks at the lock.
        lock.refuse_while_backup_holds(settings.lock_table, request.array)
        if request.mode == "attach":
            _refuse_copies_attached(request, target, snapshot_set)
    except RaidsnapError:
        lock.release(settings.lock_table, request.array, execution_arn)
        raise
    if taken_over is not None:
        notes.append(
            f"took over the restore lock of {request.array} from {taken_over.execution_arn}, "
            "which is no longer running (or whose lease ran out)"
        )


def _refuse_what_the_lock_would(
    request: RestoreInput,
    settings: RestoreSettings,
    snapshot_set: SnapshotSet,
    target: instances.ArrayInstance,
) -> None:
    """What ``_take_lock`` refuses, asked without taking the lock (``preview``)."""
    lock.refuse_while_held(settings.lock_table, request.array)
    lock.refuse_while_backup_holds(settings.lock_table, request.array)
    if request.mode == "attach":
        _refuse_copies_attached(request, target, snapshot_set)


def _refuse_copies_attached(
    request: RestoreInput, target: instances.ArrayInstance, snapshot_set: SnapshotSet
) -> None:
    """Where the array (or a copy of it) is attached, attach mode restores only a read-only
    copy, under an md device and a mount point of its own. The copy gets its own md UUID, so
    md can never mix it with the array, and its volumes are tagged raidsnap:read-only-copy, so
    backups, recovery evidence and replace mode never take them for the array's members. A
    writable second copy next to the array is refused: both would be written, and which one is
    the array would be a guess. Volumes a set was taken from, or that carry the array's tag
    (every restored volume does), count as copies."""
    array = request.array
    attached = sorted({a.volume_id for a in target.attachments} - {target.boot_volume_id or ""})
    if not attached:
        return
    sources = {m.volume_id for s in snapshot_sets.list_sets(array) for m in s.members}
    tagged = {v for v, t in instances.volume_tags(attached).items() if t.get(tags.ARRAY) == array}
    copies = sorted((sources | tagged) & set(attached))
    if not copies:
        return
    if not request.readOnly:
        raise InvalidInputError(
            "mode",
            f"{', '.join(copies)} of {array} "
            f"{'are' if len(copies) > 1 else 'is'} attached to {target.instance_id}: next to "
            "the array, "
            "attach restores only a read-only copy (readOnly true, with an mdDevice and a "
            "mountPoint of its own); a second writable copy there would leave which one is the "
            "array a guess. Restore onto another instance, or use mode replace (it releases "
            "the array there and detaches its members, keeping them). Nothing was changed",
        )
    _refuse_the_arrays_own_places(request, target, snapshot_set)


def _refuse_the_arrays_own_places(
    request: RestoreInput, target: instances.ArrayInstance, snapshot_set: SnapshotSet
) -> None:
    """A read-only copy next to the array needs its own md device and mount point: the array's
    (as its set recorded them) are taken."""
    device = _recorded_md_device(snapshot_set)
    mount = snapshot_set.recorded_md.get("mountPoint") or snapshot_set.tag_values.get(
        tags.MOUNT_POINT, ""
    )
    for field, given, taken in (
        ("mdDevice", request.mdDevice, device),
        ("mountPoint", request.mountPoint, mount),
    ):
        if given is None or given == taken:
            raise InvalidInputError(
                field,
                f"a read-only copy of {request.array} next to the array on "
                f'{target.instance_id} needs a "{field}" of its own (the array\'s is '
                f"{taken or 'unknown'}); give one, for example "
                f'"mdDevice": "/dev/md10" and "mountPoint": "/mnt/{request.array}-copy". '
                "Nothing was changed",
            )


def _resolve_target(
    request: RestoreInput, table: str, notes: list[str], *, record: bool = True
) -> tuple[instances.ArrayInstance, bool, str | None]:
    """The target instance, whether the restore must tag it with the array, and its tag.

    Without a target: the array's instance as raidsnap recorded it (raidsnap.aws.homes). A
    target given is acted on only when it is the array's (tagged for it, recorded, or named in
    the configuration) or tagged for a copy (plan.targets.tag_target)."""
    if request.targetInstanceId is None:
        try:
            instance = homes.array_instance(table, request.array, notes, record=record)
        except ArrayNotFoundError as err:
            raise ArrayNotFoundError(
                f"{err}. To restore onto another instance, give targetInstanceId"
            ) from None
        return instance, False, request.array
    instance_id = request.targetInstanceId
    state, target_tags = instances.instance_facts(instance_id)
    if state == "unknown":
        raise InvalidInputError(
            "targetInstanceId", f"instance {instance_id} does not exist in this region"
        )
    held = tags.held_name(target_tags, request.array)
    configured = homes.configured(request.array)
    tag_target = plan_targets.tag_target(
        request.array,
        instance_id,
        target_tags,
        homes.as_recorded(homes.recorded(table, request.array)),
        configured,
        another_array=held not in ("", request.array) and homes.known_array(table, held),
    )
    if state != "running":
        raise InstanceNotReadyError(
            f"target {instance_id} is {state}, not running; start it and restore again"
        )
    # An Auto Scaling group may launch the replacement before it terminates the old instance:
    # both hold the tag until then, and backups stay with the recorded one (raidsnap.aws.homes).
    if tag_target and not configured.launched(target_tags):
        _refuse_a_second_holder(request.array, instance_id)
    return instances.describe_instance(instance_id), tag_target, held or None


def _refuse_a_second_holder(array: str, instance_id: str) -> None:
    """An untagged target becomes the array's instance only when no other running instance is
    tagged with the array: two would leave which one holds it a guess."""
    holders = sorted(i.instance_id for i, _ in instances.tagged_running(array))
    if holders:
        raise InvalidInputError(
            "targetInstanceId",
            f"{instance_id} is not tagged {tags.ARRAY} and {', '.join(holders)} still "
            f"carr{'y' if len(holders) > 1 else 'ies'} {tags.ARRAY}={array}; restoring there "
            f"would make two instances {array}'s. Use mode replace on the array's instance, or "
            "restore a read-only copy onto an instance tagged for a copy. Nothing was changed",
        )
