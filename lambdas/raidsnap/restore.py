"""The restore workflow's steps, as plain functions of the workflow state.

Every step works on all members at once (one Lambda invocation, one Describe per look), so a
restore of 16 members makes as many state transitions as one of 2.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC
from typing import Any

from botocore.exceptions import ClientError

from raidsnap import clients, snapshot_sets, tags
from raidsnap.aws import commands, error_code, fsr, instances, lock, volumes
from raidsnap.environment import RestoreDocuments, RestoreSettings, initialization_for
from raidsnap.errors import (
    ArrayNotFoundError,
    IncompleteSnapshotSetError,
    InstanceNotReadyError,
    InvalidInputError,
    RaidsnapError,
    SnapshotSetNotFoundError,
    VolumeFailedError,
    cause_message,
    public_name,
)
from raidsnap.models import RestoreInput, parse_restore_input
from raidsnap.observability import logger
from raidsnap.plan import cleanup as plan_cleanup
from raidsnap.plan import devices as plan_devices
from raidsnap.plan import fsr as plan_fsr
from raidsnap.plan import volumes as plan_volumes

State = dict[str, Any]

VOLUME_POLL_SECONDS = 5
VOLUME_BUDGET_SECONDS = 1800
ATTACH_POLL_SECONDS = 3
ATTACH_BUDGET_SECONDS = 600
DETACH_POLL_SECONDS = 5
DETACH_BUDGET_SECONDS = 600
COMMAND_POLL_SECONDS = 2
CLEANUP_POLL_SECONDS = 5
# Cleanup asks for a normal detach first, and forces it after this many looks.
CLEANUP_FORCE_AFTER = 6
CLEANUP_MAX_LOOKS = 120
ASSEMBLE_TIMEOUT_SECONDS = 600
RELEASE_TIMEOUT_SECONDS = 300
PREWARM_TIMEOUT_SECONDS = 172800
# A conservative read pace for estimating how long a prewarm takes, to space out the polls.
PREWARM_MIB_PER_SECOND = 250


# ---------------------------------------------------------------------- prepare


def prepare(event: dict[str, Any], settings: RestoreSettings) -> State:
    """Validate the input, resolve set, target and AZ, check the agent, take the lock.

    Nothing in EC2 or SSM changes here: every refusal happens before the first change."""
    request = parse_restore_input(event.get("input"))
    execution = event.get("execution") or {}
    execution_arn = str(execution.get("id", ""))
    started = execution.get("startTime")
    # Without the context object's start time (a hand invocation) the run still gets a nonce
    # of its own; only the clean-up after a stopped run could not find its volumes then.
    run = plan_volumes.run_nonce(execution_arn, str(started)) if started else uuid.uuid4().hex[:16]
    snapshot_set = _resolve_set(request)
    target, tag_target, target_tag = _resolve_target(request)
    if request.mode == "replace" and target_tag != request.array:
        raise InvalidInputError(
            "mode",
            f"replace releases the array on the instance that holds it, but {target.instance_id} "
            f"is not tagged {tags.ARRAY}={request.array}; use mode attach",
        )
    agent = instances.agent(target.instance_id)
    if not agent.online:
        raise InstanceNotReadyError(
            f"the SSM agent of {target.instance_id} is not online, so the array cannot be "
            "assembled there; start the instance or fix its agent (and its instance profile), "
            "then restore again. Nothing was changed"
        )
    if agent.too_old:
        raise InstanceNotReadyError(
            f"{agent.too_old_reason()}, so the array cannot be assembled there; then restore "
            "again. Nothing was changed"
        )
    notes: list[str] = []
    members = plan_volumes.member_specs(request, snapshot_set, notes)
    md_uuid = plan_volumes.md_uuid(request, snapshot_set)
    mount_point = plan_volumes.mount_point(request, snapshot_set, notes)
    initialization = request.initialization or initialization_for(
        request.array, settings.default_initialization
    )
    rate = request.initializationRate
    if initialization == "rate" and rate is None:
        rate = settings.default_initialization_rate
    taken_over = lock.acquire(
        settings.lock_table,
        request.array,
        execution_arn,
        snapshot_set.set_id,
        settings.lock_lease_seconds,
    )
    # Checked under the lock, so that a restore already running answers RestoreInProgress
    # first; a refusal here (BackupInProgress among them) gives the lock back and changes
    # nothing else.
    try:
        # After the lock is written: a backup writes its hold before it looks at the lock.
        lock.refuse_while_backup_holds(settings.lock_table, request.array)
        if request.mode == "attach":
            _refuse_copies_attached(request.array, target)
    except RaidsnapError:
        lock.release(settings.lock_table, request.array, execution_arn)
        raise
    if taken_over is not None:
        notes.append(
            f"took over the restore lock of {request.array} from {taken_over.execution_arn}, "
            "which is no longer running (or whose lease ran out)"
        )
    return {
        "array": request.array,
        "setId": snapshot_set.set_id,
        "execution": {"id": execution_arn, "startTime": execution.get("startTime")},
        "run": run,
        "setTakenAt": snapshot_set.start_time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "targetInstanceId": target.instance_id,
        "availabilityZone": target.availability_zone,
        "tagTarget": tag_target,
        "mode": request.mode,
        "mdDevice": plan_devices.md_device(
            request.mdDevice, snapshot_set.tag_values.get(tags.MD_DEVICE, ""), notes
        ),
        "mdUuid": md_uuid,
        "mountPoint": mount_point,
        "readOnly": request.readOnly,
        "initialization": {
            "requested": initialization,
            "used": initialization,
            "rate": rate if initialization == "rate" else None,
            "allowOptimizing": request.allowOptimizing,
            "fsrTimeoutSeconds": request.fsrTimeoutSeconds or settings.fsr_timeout_seconds,
        },
        "members": members,
        "sourceVolumeIds": [m.volume_id for m in snapshot_set.by_index()],
        "fsr": {"status": "start" if initialization == "fsr" else "skipped"},
        "notes": notes,
    }


def _refuse_copies_attached(array: str, target: instances.ArrayInstance) -> None:
    """Attach mode needs a target without any copy of the array: mdadm refuses a second array
    with an md UUID that is already active, and with old members still attached, mdadm
    --assemble --scan or udev at the next boot may build the array from old and new members
    (RAID 0 event counts cannot tell them apart). Volumes a set was taken from, or that carry
    the array's tag (every restored volume does), count as copies; the assemble document
    checks the superblocks themselves on the instance as well."""
    attached = sorted({a.volume_id for a in target.attachments} - {target.boot_volume_id or ""})
    if not attached:
        return
    sources = {m.volume_id for s in snapshot_sets.list_sets(array) for m in s.members}
    tagged = {v for v, t in instances.volume_tags(attached).items() if t.get(tags.ARRAY) == array}
    copies = sorted((sources | tagged) & set(attached))
    if copies:
        raise InvalidInputError(
            "mode",
            f"attach needs a target without a copy of {array}, but {copies} of {array} are "
            f"attached to {target.instance_id}: mdadm cannot assemble a second array with the "
            "same md UUID next to the live one, and at the next boot old and new members could "
            "be mixed. Restore onto another instance, or use mode replace (it releases the "
            "array there and detaches its members, keeping them). Nothing was changed",
        )


def _resolve_set(request: RestoreInput) -> snapshot_sets.SnapshotSet:
    if request.setId == "latest":
        found = snapshot_sets.latest_complete(request.array)
        if found is None:
            others = snapshot_sets.list_sets(request.array)
            detail = f"; its {len(others)} sets are all incomplete or failed" if others else ""
            raise SnapshotSetNotFoundError(
                f"array {request.array} has no complete snapshot set to restore{detail}"
            )
        return found
    found = snapshot_sets.get_set(request.array, request.setId)
    if found is None or found.array != request.array:
        where = f" (its snapshots are tagged with array {found.array})" if found else ""
        raise SnapshotSetNotFoundError(
            f"no snapshot set {request.setId} of array {request.array}{where}; "
            'give an existing set id or "latest"'
        )
    if not found.complete:
        raise IncompleteSnapshotSetError(_why_incomplete(found))
    return found


def _why_incomplete(s: snapshot_sets.SnapshotSet) -> str:
    problems = []
    m = s.manifest
    if m is None:
        problems.append(
            "raidsnap never recorded it: its snapshots carry raidsnap's tags, but no backup of "
            "raidsnap took them (another tool copied the tags, or someone set them)"
        )
    else:
        if m.degraded:
            problems.append(
                f"the array was degraded when it was taken (slots {list(m.missing_slots)} "
                "had no working member)"
            )
        if m.status != "taken":
            problems.append("its backup never finished recording it")
        if s.missing:
            problems.append(f"members {s.missing} of {m.member_count} have no snapshot")
        for x in s.members:
            if x.state != "completed":
                problems.append(f"snapshot {x.snapshot_id} (member {x.index}) is {x.state}")
    return (
        f"set {s.set_id} of {s.array} is incomplete and is never restored: "
        + "; ".join(problems or ["it is not complete"])
        + '. Restore another set, or "latest"'
    )


def _resolve_target(request: RestoreInput) -> tuple[instances.ArrayInstance, bool, str | None]:
    """The target instance, whether the restore must tag it with the array, and its tag."""
    if request.targetInstanceId is None:
        try:
            instance = instances.find_instance(request.array)
        except ArrayNotFoundError as err:
            raise ArrayNotFoundError(
                f"{err}. To restore onto another instance, give targetInstanceId"
            ) from None
        return instance, False, request.array
    instance_id = request.targetInstanceId
    try:
        reservations = clients.ec2().describe_instances(InstanceIds=[instance_id])["Reservations"]
    except ClientError as err:
        if error_code(err).startswith("InvalidInstanceID"):
            raise InvalidInputError(
                "targetInstanceId", f"instance {instance_id} does not exist in this region"
            ) from None
        raise
    raw = reservations[0]["Instances"][0]
    state = raw.get("State", {}).get("Name", "")
    if state != "running":
        raise InstanceNotReadyError(
            f"target {instance_id} is {state}, not running; start it and restore again"
        )
    target_tag = tags.as_dict(raw.get("Tags")).get(tags.ARRAY)  # type: ignore[arg-type]
    tag_target = False
    if target_tag is None:
        try:
            holder: instances.ArrayInstance | None = instances.find_instance(request.array)
        except ArrayNotFoundError:
            holder = None
        if holder is not None and holder.instance_id != instance_id:
            raise InvalidInputError(
                "targetInstanceId",
                f"{instance_id} is not tagged {tags.ARRAY} and {holder.instance_id} still holds "
                f"{request.array}; to restore a copy there, tag {instance_id} "
                f"{tags.ARRAY}=<a name for the copy> first",
            )
        # The array's instance is gone: the target becomes the array's instance.
        tag_target = True
    return instances.describe_instance(instance_id), tag_target, target_tag


# ---------------------------------------------------------------------- fast snapshot restore


def fsr_step(state: State, settings: RestoreSettings) -> State:
    """First call: enable FSR for the pairs not already enabled. Later calls: look, and decide
    how long to wait, or give up and fall back to prewarm."""
    f = dict(state["fsr"])
    zone = state["availabilityZone"]
    ids = [m["snapshotId"] for m in state["members"]]
    arn = state["execution"]["id"]
    if f["status"] == "start":
        too_many = _fsr_quota_problem(state, ids)
        if too_many is not None:
            # Nothing is enabled; pairs only an earlier try of this step enabled (it claimed them
            # first) are this run's and go off with the fallback.
            claims = [c for c in lock.fsr_claims(settings.lock_table) if c.execution_arn == arn]
            mine = plan_fsr.in_zone((p for c in claims for p in c.pairs), zone)
            state["fsr"] = {"status": "fallback", "ours": mine, "before": [], "disabled": False}
            return _fsr_fallback(state, too_many)
        before, adopted = _fsr_owners(settings.lock_table, arn, ids, zone)
        ours = [i for i in ids if i not in before]
        lock.claim_fsr(
            settings.lock_table, state["array"], arn, [plan_fsr.pair_key(i, zone) for i in ours]
        )
        enabled = fsr.enable(ours, zone)
        lock.record_fsr_enabled(
            settings.lock_table,
            arn,
            {plan_fsr.pair_key(sid, zone): when for sid, when in enabled.enabling_times.items()},
        )
        f = {
            "status": "pending",
            "ours": ours,
            "before": sorted(before),
            "waitedSeconds": 0,
            "seen": {},
            "disabled": False,
        }
        state["fsr"] = f
        if enabled.problems:
            # A refusal (another restore took the quota's last places since we looked): what
            # this run enabled goes off again, what EC2 refused was never on.
            f["ours"] = [i for i in ours if i not in enabled.refused]
            return _fsr_fallback(state, "EC2 refused to enable FSR: " + "; ".join(enabled.problems))
        f["waitSeconds"] = plan_fsr.next_wait(
            state["members"], f, {}, bool(state["initialization"]["allowOptimizing"])
        )
        if before:
            state["notes"].append(
                f"FSR was already enabled in {zone} for {len(before)} snapshots; "
                "the restore leaves it enabled"
            )
        if adopted:
            state["notes"].append(
                f"FSR that ended runs left enabled in {zone} for {len(adopted)} snapshots is now "
                "this restore's, and is disabled with its own"
            )
        return state

    f["waitedSeconds"] = int(f["waitedSeconds"]) + int(f["waitSeconds"])
    pairs = fsr.states(ids, zone)
    allow = bool(state["initialization"]["allowOptimizing"])
    current = plan_fsr.current_states(ids, pairs)
    plan_fsr.observe(f, current)
    state["fsr"] = f
    limit = int(state["initialization"]["fsrTimeoutSeconds"])
    verdict = plan_fsr.judge(
        state["members"], f, current, pairs, allow_optimizing=allow, limit_seconds=limit
    )
    if verdict.status == "ready":
        f["status"] = "ready"
        f["states"] = current
        return state
    if verdict.status == "fallback":
        return _fsr_fallback(state, verdict.why)
    f["waitSeconds"] = verdict.wait_seconds
    return state


def _fsr_owners(table: str, arn: str, ids: list[str], zone: str) -> tuple[set[str], set[str]]:
    """Snapshots whose FSR is on in the zone already, split into those someone else keeps on
    and those ended runs left on (raidsnap.plan.fsr.owners)."""
    claims = {c.execution_arn: c.pairs for c in lock.fsr_claims(table)}
    return plan_fsr.owners(fsr.already_active(ids, zone), claims, arn, zone, lock.running)


def _fsr_quota_problem(state: State, ids: list[str]) -> str | None:
    """Why the set cannot have FSR in this Region now, or None when it fits: the quota counts
    snapshots with FSR on in any AZ, and those of others (not this set's) leave the rest."""
    limit = fsr.region_limit()
    if limit.assumed_because is not None:
        state["notes"].append(
            f"Service Quotas did not give the Region's FSR quota ({limit.assumed_because}); "
            f"the default of {limit.snapshots} snapshots was assumed"
        )
    return plan_fsr.quota_problem(ids, limit, fsr.active_in_region())


def _fsr_fallback(state: State, why: str) -> State:
    f = state["fsr"]
    ours = list(f.get("ours", []))
    fsr.disable(ours, state["availabilityZone"])
    f["disabled"] = True
    f["status"] = "fallback"
    state["initialization"]["used"] = "prewarm"
    then = "FSR disabled again and the" if ours else "the"
    state["notes"].append(f"{why}; {then} members are prewarmed instead")
    return state


# ---------------------------------------------------------------------- volumes


def create_volumes(state: State) -> State:
    """Create every member's volume, in the target's AZ, each with a token derived from the
    execution so that a retried step creates nothing twice."""
    init = state["initialization"]
    rate = init.get("rate") if init["used"] == "rate" else None
    ids = []
    for raw in state["members"]:
        spec = plan_volumes.VolumeSpec.from_dict(raw)
        ids.append(
            volumes.create(
                spec,
                zone=state["availabilityZone"],
                execution_arn=state["execution"]["id"],
                run=state["run"],
                array=state["array"],
                set_id=state["setId"],
                initialization_rate=rate,
                extra_tags=raw.get("tags") or {},
            )
        )
    state["volumes"] = {
        "status": "creating",
        "ids": ids,
        "waitSeconds": VOLUME_POLL_SECONDS,
        "budgetSeconds": VOLUME_BUDGET_SECONDS,
    }
    return state


def check_volumes(state: State) -> State:
    """One DescribeVolumes for all members: any in error fails the run; all available ends the
    wait, and then FSR this run enabled is disabled at once (the volumes are made)."""
    v = dict(state["volumes"])
    views = volumes.describe(v["ids"])
    failed = [
        f"member {i} {vid} (from {state['members'][i]['snapshotId']})"
        for i, vid in enumerate(v["ids"])
        if vid in views and views[vid].state == "error"
    ]
    if failed:
        raise VolumeFailedError(
            f"volumes ended in error: {', '.join(failed)}. EC2 could not create them from the "
            "snapshots; the run removes what it created. Try again, or another set"
        )
    if all(vid in views and views[vid].state == "available" for vid in v["ids"]):
        v["status"] = "available"
        v["fastRestored"] = [views[vid].fast_restored for vid in v["ids"]]
        init = state["initialization"]
        slow = [vid for vid, fast in zip(v["ids"], v["fastRestored"], strict=True) if not fast]
        if init["used"] == "fsr" and slow:
            # No volume creation credit was left for these (someone else's volumes spent it, or
            # EC2 was slower than its pace): they are read once on the instance instead.
            init["prewarmVolumeIds"] = slow
            members = [i for i, vid in enumerate(v["ids"]) if vid in slow]
            state["notes"].append(
                f"members {members} were created without an FSR volume creation credit (not "
                "fast restored); they are prewarmed, the others are fast restored"
            )
        f = state.get("fsr") or {}
        if f.get("ours") and not f.get("disabled"):
            fsr.disable(list(f["ours"]), state["availabilityZone"])
            state["fsr"] = dict(f, disabled=True)
    else:
        v["budgetSeconds"] = int(v["budgetSeconds"]) - int(v["waitSeconds"])
        if v["budgetSeconds"] <= 0:
            slow = [vid for vid in v["ids"] if views.get(vid) and views[vid].state == "creating"]
            raise VolumeFailedError(
                f"volumes {slow} were still creating after {VOLUME_BUDGET_SECONDS} s"
            )
    state["volumes"] = v
    return state


# ---------------------------------------------------------------------- commands


def send_command(state: State, step: str, documents: RestoreDocuments) -> dict[str, Any]:
    """Start the release, assemble or prewarm document on the target."""
    ids = ",".join(state.get("volumes", {}).get("ids", []))
    wait = COMMAND_POLL_SECONDS
    fail_on_error = True
    if step == "release":
        document, timeout = documents.release, RELEASE_TIMEOUT_SECONDS
        # With the md UUID: release refuses, changing nothing, whatever other array the
        # device holds.
        params = {
            "MdDevice": state["mdDevice"],
            "MountPoint": state["mountPoint"],
            "MdUuid": state["mdUuid"],
        }
    elif step == "assemble":
        document, timeout = documents.assemble, ASSEMBLE_TIMEOUT_SECONDS
        params = {
            "VolumeIds": ids,
            "MdUuid": state["mdUuid"],
            "MdDevice": state["mdDevice"],
            "MountPoint": state["mountPoint"],
            "ReadOnly": "true" if state["readOnly"] else "false",
            # A read-only copy (a drill, a look at older data) is temporary: recording it in
            # mdadm.conf and fstab would bring it back at boot and outlive its teardown.
            "Persist": "false" if state["readOnly"] else "true",
        }
    elif step == "prewarm":
        document, timeout = documents.prewarm, PREWARM_TIMEOUT_SECONDS
        chosen = state["initialization"].get("prewarmVolumeIds")
        params = {"VolumeIds": ",".join(chosen) if chosen else ids, "Method": "auto"}
        largest = max(int(m["sizeGib"]) for m in state["members"])
        expected = largest * 1024 / PREWARM_MIB_PER_SECOND
        wait = int(min(300, max(10, expected / 4)))
        # A prewarm that fails leaves a usable array whose first reads are slow: say so, but
        # do not throw away a restored array for it.
        fail_on_error = False
    else:
        raise ValueError(f"unknown command step {step!r}")
    command_id = commands.send(
        document,
        state["targetInstanceId"],
        params,
        comment=f"raidsnap restore {state['setId']}",
        timeout=timeout,
    )
    return {
        "commandId": command_id,
        "instanceId": state["targetInstanceId"],
        "document": document,
        "status": "pending",
        "waitSeconds": wait,
        "budgetSeconds": timeout,
        "failOnError": fail_on_error,
    }


# ---------------------------------------------------------------------- replace mode


def detach_old(state: State) -> State:
    """Replace mode, after the release document: tag the old members raidsnap:replaced-by, then
    (next call) detach them, kept and never deleted; later calls look until they are detached.

    The old members are exactly the volumes the release document verified on the instance:
    members of the md device it released, whose md UUID it checked, and other attached disks
    whose superblock carries that UUID. A raidsnap tag on a volume, or a volume id recorded
    with an old set, proves nothing about what the volume is now; never the boot volume, never
    a volume this run created."""
    target = state["targetInstanceId"]
    old = dict(state.get("old") or {})
    if not old:
        instance = instances.describe_instance(target)
        attached = {a.volume_id for a in instance.attachments} - {instance.boot_volume_id}
        ours = set(state["volumes"]["ids"])
        reported = ((state.get("release") or {}).get("result") or {}).get("members") or []
        candidates = {str(r.get("volumeId") or "") for r in reported if isinstance(r, dict)}
        unverified = [
            str(r.get("device")) for r in reported if isinstance(r, dict) and not r.get("volumeId")
        ]
        if unverified:
            state["notes"].append(
                f"release reported members {unverified} without an EBS volume id (no NVMe "
                "serial); they were not detached"
            )
        old_ids = sorted((candidates & attached) - ours - {""})
        if old_ids:
            # Only tag now: the role may detach only volumes tagged replaced-by, and IAM may
            # not see a tag in the same second it was written. The next look detaches them.
            clients.ec2().create_tags(
                Resources=old_ids,
                Tags=[{"Key": tags.REPLACED_BY, "Value": state["execution"]["id"]}],
            )
        else:
            state["notes"].append(
                f"the release document verified no old member of md array {state['mdUuid']} "
                f"attached to {target}; nothing was detached"
            )
        state["old"] = {
            "status": "detaching" if old_ids else "detached",
            "volumeIds": old_ids,
            "waitSeconds": DETACH_POLL_SECONDS,
            "budgetSeconds": DETACH_BUDGET_SECONDS,
        }
        return state
    views = volumes.describe(old["volumeIds"])
    still = [vid for vid, view in views.items() if view.on(target) is not None]
    for vid in still:
        if not any(a.state == "detaching" for a in views[vid].attachments):
            volumes.detach(vid, target)
    if not still:
        old["status"] = "detached"
    else:
        old["budgetSeconds"] = int(old["budgetSeconds"]) - int(old["waitSeconds"])
        if old["budgetSeconds"] <= 0:
            raise VolumeFailedError(
                f"old members {still} did not detach from {target} within "
                f"{DETACH_BUDGET_SECONDS} s; check the instance, then restore again"
            )
    state["old"] = old
    return state


# ---------------------------------------------------------------------- attach


def attach_volumes(state: State) -> State:
    """First call: tag a new target with the array, if it must be. Then: attach every new volume,
    in member order, to free device names. Later calls: one DescribeVolumes until all are
    attached."""
    target = state["targetInstanceId"]
    ids: list[str] = state["volumes"]["ids"]
    a = dict(state.get("attach") or {})
    views = volumes.describe(ids)

    def on_target(vid: str) -> plan_volumes.Attachment | None:
        view = views.get(vid)
        return view.on(target) if view else None

    if state.get("tagTarget") and not a.get("targetTagged"):
        # The new instance becomes the array's: the role attaches only to instances tagged with
        # an array, and IAM may not see a tag in the same second, so attach on the next look.
        clients.ec2().create_tags(
            Resources=[target], Tags=[{"Key": tags.ARRAY, "Value": state["array"]}]
        )
        state["attach"] = {
            "status": "attaching",
            "targetTagged": True,
            "waitSeconds": ATTACH_POLL_SECONDS,
            "budgetSeconds": ATTACH_BUDGET_SECONDS,
        }
        return state
    if not a.get("devices"):
        instance = instances.describe_instance(target)
        need = [vid for vid in ids if on_target(vid) is None]
        names = plan_devices.free_device_names([x.device for x in instance.attachments], len(need))
        devices = {vid: _device_of(on_target(vid)) for vid in ids if vid not in need}
        devices |= dict(zip(need, names, strict=True))
        for vid in need:
            volumes.attach(vid, target, devices[vid])
        state["attach"] = a | {
            "status": "attaching",
            "devices": [devices[vid] for vid in ids],
            "waitSeconds": ATTACH_POLL_SECONDS,
            "budgetSeconds": ATTACH_BUDGET_SECONDS,
        }
        return state
    pending = []
    for vid, device in zip(ids, a["devices"], strict=True):
        found = on_target(vid)
        if found is None:
            volumes.attach(vid, target, device)  # the first request was lost
            pending.append(vid)
        elif found.state != "attached":
            pending.append(vid)
    if not pending:
        a["status"] = "attached"
    else:
        a["budgetSeconds"] = int(a["budgetSeconds"]) - int(a["waitSeconds"])
        if a["budgetSeconds"] <= 0:
            raise VolumeFailedError(
                f"volumes {pending} did not attach to {target} within {ATTACH_BUDGET_SECONDS} s"
            )
    state["attach"] = a
    return state


def _device_of(attachment: plan_volumes.Attachment | None) -> str:
    return attachment.device if attachment is not None else ""


# ---------------------------------------------------------------------- finish


def finish(state: State, settings: RestoreSettings) -> State:
    """Release the lock and shape the output. The array is assembled and mounted by now: a
    prewarm that failed, could not start or could not be followed is a warning, never a
    failure of the run."""
    lock.release(settings.lock_table, state["array"], state["execution"]["id"])
    notes = list(state["notes"])
    warnings: list[str] = []
    if state.get("tagTarget"):
        notes.append(
            f"tagged {state['targetInstanceId']} {tags.ARRAY}={state['array']}: backups of "
            f"{state['array']} now follow the restored array"
        )
    assembled = (state.get("assemble") or {}).get("result") or {}
    prewarm_out = _prewarm_outcome(state, warnings)
    init = state["initialization"]
    f = state.get("fsr") or {}
    if init["requested"] == "fsr" and init["used"] == "fsr":
        notes.append(
            f"FSR enabled for {len(f.get('ours', []))} snapshots in {state['availabilityZone']} "
            "and disabled again once the volumes existed"
        )
    taken = state.get("setTakenAt")
    if taken:
        notes.append(
            f"the array holds the data of set {state['setId']}, taken {taken}; writes made "
            "to the array after that time are not in it"
        )
    state["output"] = {
        "array": state["array"],
        "setId": state["setId"],
        "setTakenAt": taken,
        "volumeIds": state["volumes"]["ids"],
        "devices": (state.get("attach") or {}).get("devices", []),
        "mdDevice": assembled.get("mdDevice") or state["mdDevice"],
        "mountPoint": assembled.get("mountPoint") or state["mountPoint"],
        "mdUuid": state["mdUuid"],
        "targetInstanceId": state["targetInstanceId"],
        "availabilityZone": state["availabilityZone"],
        "mode": state["mode"],
        "initialization": init["used"],
        "requestedInitialization": init["requested"],
        "fastRestored": state["volumes"].get("fastRestored", []),
        "memberInitialization": _member_initialization(state),
        "replacedVolumeIds": (state.get("old") or {}).get("volumeIds", []),
        "prewarm": prewarm_out,
        "warnings": warnings,
        "notes": notes,
    }
    return state


_SLOW_READS = (
    "the array is assembled, mounted and usable, but blocks not yet read come from S3 slowly "
    "on first access; run the prewarm document when convenient"
)


def _prewarm_outcome(state: State, warnings: list[str]) -> dict[str, Any] | None:
    """What became of the prewarm, and how far it got, in words for the output's warnings."""
    prewarm = state.get("prewarm") or {}
    error = state.get("prewarmError") or {}
    if not prewarm and not error:
        return None
    ids = ",".join(state["volumes"]["ids"])
    if not prewarm:
        reason = cause_message(str(error.get("Cause", ""))) or str(error.get("Error", ""))
        warnings.append(
            f"the prewarm was not started ({public_name(str(error.get('Error', '')))}: "
            f"{reason}); {_SLOW_READS} (VolumeIds {ids})"
        )
        return {"status": "not-started", "reason": reason}
    if error:
        # The prewarm was started but could not be followed: one more look, best effort.
        command_id, instance_id = prewarm["commandId"], prewarm["instanceId"]
        try:
            looked = commands.fetch(command_id, instance_id)
        except ClientError as err:
            why = f"{error.get('Error')}, then {error_code(err)}"
            warnings.append(
                f"could not follow the prewarm (command {command_id} on {instance_id}: {why}); "
                f"it may have finished or may still be reading; {_SLOW_READS} if it did not"
            )
            return {"status": "unknown", "commandId": command_id}
        if looked.status == "pending":
            warnings.append(
                f"the prewarm (command {command_id} on {instance_id}) is still reading: "
                f"{_progress(looked.stderr) or 'progress unknown'}; the array is mounted and "
                "usable meanwhile"
            )
            return {"status": "running", "commandId": command_id}
        prewarm = dict(prewarm, status=looked.status, result=looked.result)
        prewarm["stderrTail"] = looked.stderr_tail()
    if prewarm.get("status") == "success":
        return {"status": "success", "result": prewarm.get("result")}
    tail = str(prewarm.get("stderrTail", ""))
    got = _progress(tail)
    warnings.append(
        f"the prewarm failed{' after reading ' + got if got else ''}: "
        f"{tail.splitlines()[-1] if tail else 'no output'}; {_SLOW_READS} (VolumeIds {ids})"
    )
    return {"status": "failed", "progress": got, "stderrTail": tail}


def _progress(stderr: str) -> str:
    """The prewarm's last progress line ("progress: nvme1n1 512/8192MiB ..."), summed."""
    lines = [ln for ln in stderr.splitlines() if "progress:" in ln]
    if not lines:
        return ""
    pairs = re.findall(r"(\d+)/(\d+)MiB", lines[-1])
    done, total = sum(int(a) for a, _ in pairs), sum(int(b) for _, b in pairs)
    return f"{done} of {total} MiB" if total else ""


def _member_initialization(state: State) -> list[str]:
    """How each member's volume was initialized, in member order: fsr for a volume EC2 fast
    restored, prewarm for one read on the instance, else the run's initialization."""
    init = state["initialization"]
    ids = state["volumes"]["ids"]
    fast = state["volumes"].get("fastRestored") or [False] * len(ids)
    prewarmed = set(init.get("prewarmVolumeIds") or [])
    out = []
    for vid, fast_restored in zip(ids, fast, strict=True):
        if vid in prewarmed:
            out.append("prewarm")
        elif init["used"] == "fsr" and fast_restored:
            out.append("fsr")
        else:
            out.append(str(init["used"]))
    return out


# ---------------------------------------------------------------------- failure path


def cleanup(state: State, settings: RestoreSettings, documents: RestoreDocuments) -> dict[str, Any]:
    """Remove what this run made, and only that; then name the failure.

    Called in a loop by the workflow: each call detaches what is still attached (forcing it
    after a while), deletes what is detached, and says how long to wait for the rest. A volume
    attached to the target is detached only once the instance has confirmed that no md device
    and no mount uses it (discover, then release of an unmounted array of this run's volumes);
    where it cannot confirm that, the volume is left attached and the cause says so."""
    c = dict(state.get("cleanup") or {})
    error = state.get("error") or {}
    arn = str((state.get("execution") or {}).get("id", ""))
    zone = state.get("availabilityZone")
    array = state.get("array")
    c.setdefault("error", public_name(str(error.get("Error", "States.Runtime"))))
    c.setdefault("cause", cause_message(str(error.get("Cause", ""))))
    c.setdefault("looks", 0)
    c["looks"] += 1

    # FSR this run enabled and has not disabled yet: from the state, and from the lock item,
    # which has the pairs even when the step that enabled them lost EC2's answer.
    if array and zone and not c.get("fsrDone") and not (state.get("fsr") or {}).get("disabled"):
        ours = set((state.get("fsr") or {}).get("ours") or [])
        claim = lock.fsr_claim(settings.lock_table, arn)
        if claim is not None:
            ours |= set(plan_fsr.in_zone(claim.pairs, zone))
        if ours:
            fsr.disable(sorted(ours), zone)
            c["fsrDisabled"] = sorted(ours)
        c["fsrDone"] = True

    # Only this run's volumes: those its state recorded, and those tagged with its nonce (a
    # CreateVolume whose answer was lost). A run that failed before Prepare chose its nonce
    # created nothing; an earlier execution of the same name is another run.
    run = str(state.get("run") or "")
    known = set((state.get("volumes") or {}).get("ids") or [])
    views = volumes.created_by(arn, run) if arn and run else {}
    views |= volumes.describe(known - set(views))
    target = str(state.get("targetInstanceId") or "")
    on_target = sorted(
        vid
        for vid, view in views.items()
        if plan_volumes.owned_by(view, arn, run)
        and view.state not in ("deleting", "deleted")
        and plan_cleanup.attached_to(view, target)
    )
    confirm = dict(c.get("confirm") or {})
    if on_target and confirm.get("status") not in ("free", "kept"):
        confirm = _confirm_free(state, confirm, on_target, documents)
        c["confirm"] = confirm
        if confirm["status"] == "pending" and c["looks"] < CLEANUP_MAX_LOOKS:
            c["status"] = "pending"
            c["waitSeconds"] = CLEANUP_POLL_SECONDS
            return c
        if confirm["status"] == "pending":
            c["confirm"] = confirm = dict(
                confirm, status="kept", reason="the instance did not answer in time"
            )
    keep = set(on_target) if confirm.get("status") == "kept" else set()
    pending = volumes.remove_created(views, arn, run, c, force_after=CLEANUP_FORCE_AFTER, keep=keep)
    if pending and c["looks"] < CLEANUP_MAX_LOOKS:
        c["status"] = "pending"
        c["waitSeconds"] = CLEANUP_POLL_SECONDS
        return c

    if array and state.get("tagTarget") and target and not keep:
        # Only the tag this run added: DeleteTags with a value removes it only when it matches.
        clients.ec2().delete_tags(Resources=[target], Tags=[{"Key": tags.ARRAY, "Value": array}])
    if array and arn:
        lock.release(settings.lock_table, array, arn)
    c["status"] = "done"
    c["kept"] = sorted(keep)
    c["cause"] = c["cause"] + _cleanup_summary(state, c, pending)
    logger.info(
        "restore cleaned up", extra={"deleted": c["deleted"], "left": pending, "kept": c["kept"]}
    )
    return c


DISCOVER_TIMEOUT_SECONDS = 120


def _confirm_free(
    state: State, confirm: dict[str, Any], ours: list[str], documents: RestoreDocuments
) -> dict[str, Any]:
    """One step of asking the target whether any md device or mount uses this run's attached
    volumes: discover (read only); then release each array of them that is not mounted (the
    set's md UUID, so that release refuses anything else). A mounted array is the user's and
    is never released here. Returns the confirmation with status pending, free or kept."""
    target = state["targetInstanceId"]

    def kept(reason: str) -> dict[str, Any]:
        return dict(confirm, status="kept", reason=reason)

    def send(document: str, params: dict[str, str], timeout: int) -> str | None:
        try:
            return commands.send(
                document,
                target,
                params,
                comment=f"raidsnap cleanup {state['setId']}",
                timeout=timeout,
            )
        except ClientError as err:
            confirm["reason"] = f"{document} could not be sent to {target} ({error_code(err)})"
            return None

    if not confirm:
        command_id = send(
            documents.discover, {"ArrayName": state["array"]}, DISCOVER_TIMEOUT_SECONDS
        )
        if command_id is None:
            return kept(str(confirm["reason"]))
        return {
            "status": "pending",
            "phase": "discover",
            "commandId": command_id,
            "budgetSeconds": DISCOVER_TIMEOUT_SECONDS + 30,
        }
    looked = commands.fetch(confirm["commandId"], target)
    if looked.status == "pending":
        budget = int(confirm["budgetSeconds"]) - CLEANUP_POLL_SECONDS
        if budget <= 0:
            return kept(f"{confirm['phase']} did not finish on {target}")
        return dict(confirm, budgetSeconds=budget)
    answer = looked.result or {}
    if looked.status == "failed":
        what = answer.get("error") or looked.detail
        return kept(
            f"{confirm['phase']} failed on {target} ({what}: "
            f"{answer.get('message') or looked.stderr_tail(2)})"
        )
    if confirm["phase"] == "discover":
        holding = [
            md
            for md in answer.get("arrays") or []
            if {str(m.get("volumeId")) for m in md.get("members") or []} & set(ours)
        ]
        mounted = [md for md in holding if md.get("mountPoint")]
        if mounted:
            md = mounted[0]
            members = [m.get("volumeId") for m in md.get("members") or []]
            return kept(
                f"{md.get('device')} is assembled and mounted at {md.get('mountPoint')} from "
                f"{members}: an assembled, mounted array is the user's"
            )
        # An array with members discover could not name may hold this run's volumes all the
        # same: if it is this set's array or mounted, nothing is proven free.
        unnamed = [
            md
            for md in answer.get("arrays") or []
            if any(not m.get("volumeId") for m in md.get("members") or [])
            and (md.get("uuid") == state["mdUuid"] or md.get("mountPoint"))
        ]
        if unnamed:
            md = unnamed[0]
            return kept(
                f"{md.get('device')} (array {md.get('uuid')}"
                f"{', mounted at ' + str(md.get('mountPoint')) if md.get('mountPoint') else ''})"
                " has members the instance could not name, which may be this run's volumes"
            )
        foreign = [md for md in holding if md.get("uuid") != state["mdUuid"]]
        if foreign:
            return kept(f"{foreign[0].get('device')} (array {foreign[0].get('uuid')}) holds them")
        queue = [str(md["device"]) for md in holding]
    else:
        queue = list(confirm.get("queue") or [])[1:]
    if not queue:
        return dict(confirm, status="free")
    command_id = send(
        documents.release,
        {"MdDevice": queue[0], "MountPoint": state["mountPoint"], "MdUuid": state["mdUuid"]},
        RELEASE_TIMEOUT_SECONDS,
    )
    if command_id is None:
        return kept(str(confirm["reason"]))
    return {
        "status": "pending",
        "phase": "release",
        "queue": queue,
        "commandId": command_id,
        "budgetSeconds": RELEASE_TIMEOUT_SECONDS + 30,
    }


def _cleanup_summary(state: State, c: dict[str, Any], left: list[str]) -> str:
    parts = []
    if c["deleted"]:
        parts.append(f"deleted the {len(c['deleted'])} volumes this run created")
    if c.get("fsrDisabled"):
        parts.append(f"disabled the FSR it enabled ({len(c['fsrDisabled'])} snapshots)")
    if c.get("kept"):
        parts.append(
            f"left volumes {c['kept']} attached to {state.get('targetInstanceId')} as they are, "
            f"because the instance did not confirm that nothing uses them: "
            f"{(c.get('confirm') or {}).get('reason')}. They are this run's (tagged "
            f"{tags.RESTORE_RUN}={state.get('run')}): keep the array, or release it and delete "
            "them by hand"
        )
    if left:
        parts.append(
            f"could not remove volumes {left} in time: delete them by hand (tagged "
            f"{tags.RESTORE_RUN}={state.get('run')})"
        )
    old = (state.get("old") or {}).get("volumeIds") or []
    if old:
        parts.append(
            f"the old members {old} stay detached and intact, tagged {tags.REPLACED_BY}; "
            "re-attach them to go back"
        )
    if not parts:
        return ""
    return " [cleanup: " + "; ".join(parts) + "; snapshots untouched]"
