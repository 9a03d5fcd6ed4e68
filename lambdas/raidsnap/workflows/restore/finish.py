"""Restore, last step: release the lock and shape the output, with what became of the prewarm."""

from __future__ import annotations

import re

from botocore.exceptions import ClientError
from pydantic import JsonValue

from raidsnap import tags
from raidsnap.aws import commands, costs, error_code, homes, instances, lock, tagging
from raidsnap.environment import RestoreSettings
from raidsnap.errors import cause_message, public_name
from raidsnap.observability import count, for_array
from raidsnap.plan import targets as plan_targets
from raidsnap.workflows.restore import identity
from raidsnap.workflows.restore.contracts import (
    Finished,
    Output,
    Plan,
    RestoreState,
    StateCall,
    Volumes,
)


def _record_move(plan: Plan, table: str, notes: list[str], warnings: list[str]) -> None:
    """Record the target as the array's instance when the restore made it so (raidsnap.aws
    .homes): backups then follow the restored array, and a tag alone still moves nothing. A
    read-only copy, or a copy next to the array's instance that still holds it, moves nothing.
    The array is mounted by now: what cannot be recorded is a warning, never a failure."""
    if plan.readOnly:
        return
    try:
        _, target_tags = instances.instance_facts(plan.targetInstanceId)
        if not tags.holds(target_tags, plan.array):
            return
        home = homes.recorded(table, plan.array)
        still = False
        if home is not None and home.instance_id != plan.targetInstanceId:
            held_state, held_tags = instances.instance_facts(home.instance_id)
            # Stopped (or rebooting) still holds the array; terminated or unknown does not.
            gone = held_state in instances.GONE_STATES
            still = not gone and tags.holds(held_tags, plan.array)
        if not plan_targets.moves_home(plan.targetInstanceId, homes.as_recorded(home), still):
            if home is not None and home.instance_id != plan.targetInstanceId:
                notes.append(
                    f"{plan.array} stays recorded on {home.instance_id}, which still holds it: "
                    f"this is a copy. If {plan.targetInstanceId} is now {plan.array}'s instance, "
                    f"confirm it: raidsnap move {plan.array} {plan.targetInstanceId}"
                )
            return
        homes.record_move(table, plan.array, plan.targetInstanceId, f"restore {plan.executionArn}")
    except ClientError as err:
        warnings.append(
            f"{plan.targetInstanceId} could not be recorded as {plan.array}'s instance "
            f"({error_code(err)}); until it is, its backups are refused: run raidsnap move "
            f"{plan.array} {plan.targetInstanceId}"
        )
        return
    notes.append(f"{plan.targetInstanceId} is now recorded as {plan.array}'s instance")


def finish(call: StateCall, settings: RestoreSettings) -> Finished:
    """Release the lock and shape the output. The array is assembled and mounted by now: a
    prewarm that failed, could not start or could not be followed is a warning, never a
    failure of the run."""
    state = call.state
    plan, v = _assembled(state)
    lock.release(settings.lock_table, plan.array, plan.executionArn)
    for_array(plan.array)
    count("RestoreSucceeded")
    notes = steps_notes(state)
    warnings: list[str] = []
    _record_identity(plan, v, new_uuid_of(state), notes, warnings)
    _record_move(plan, settings.lock_table, notes, warnings)
    prewarm_out = _prewarm_outcome(state, v, warnings)
    cost = _cost(plan, v, warnings)
    out = output_of(state, prewarm_out, warnings, notes)
    return Finished(output=out.model_copy(update={"cost": cost}))


def _cost(plan: Plan, v: Volumes, warnings: list[str]) -> dict[str, JsonValue] | None:
    """The run's cost so far and its Done state, with the volumes it created (kept: a monthly
    figure); the array is mounted: a history that cannot be read is a warning, never a
    failure."""
    shapes = {
        vid: (m.sizeGib, m.volumeType, m.iops, m.throughput)
        for vid, m in zip(v.ids, plan.members, strict=False)
    }
    try:
        return costs.so_far(
            plan.executionArn, zone=plan.availabilityZone, volumes=shapes, array=plan.array
        )
    except ClientError as err:
        warnings.append(
            f"the run's cost could not be read ({error_code(err)}); "
            f"raidsnap status {plan.executionArn} computes it"
        )
        return None


def output_of(
    state: RestoreState,
    prewarm: dict[str, JsonValue] | None,
    warnings: list[str],
    notes: list[str],
) -> Output:
    """The run's output for an assembled and mounted array (the steps' ``notes`` so far), with
    what is known of its prewarm."""
    plan, v = _assembled(state)
    notes = list(notes)
    assembled = (state.assemble.result if state.assemble else None) or {}
    requested, used = plan.initialization.requested, v.initialization
    ours = state.fsr.ours if state.fsr and state.fsr.status == "ready" else []
    if ours:
        notes.append(
            f"FSR enabled for {len(ours)} snapshots in {plan.availabilityZone} "
            "and disabled again once the volumes existed"
        )
    taken = plan.setTakenAt
    if taken:
        notes.append(
            f"the array holds the data of set {plan.setId}, taken {taken}; writes made "
            "to the array after that time are not in it"
        )
    return Output(
        array=plan.array,
        setId=plan.setId,
        setTakenAt=taken,
        volumeIds=v.ids,
        devices=(state.attach.devices if state.attach else None) or [],
        mdDevice=str(assembled.get("mdDevice") or plan.mdDevice),
        mountPoint=str(assembled.get("mountPoint") or plan.mountPoint),
        mdUuid=plan.mdUuid,
        newMdUuid=new_uuid_of(state),
        targetInstanceId=plan.targetInstanceId,
        availabilityZone=plan.availabilityZone,
        mode=plan.mode,
        initialization=used,
        requestedInitialization=requested,
        fastRestored=v.fastRestored or [],
        memberInitialization=_member_initialization(v),
        replacedVolumeIds=state.old.volumeIds if state.old else [],
        prewarm=prewarm,
        warnings=warnings,
        notes=notes,
    )


def new_uuid_of(state: RestoreState) -> str:
    """The restored array's own md UUID, as the assemble document reports it (else planned)."""
    plan, _ = _assembled(state)
    assembled = (state.assemble.result if state.assemble else None) or {}
    return str(assembled.get("uuid") or plan.newMdUuid)


def steps_notes(state: RestoreState) -> list[str]:
    """Each step's notes, in the order the steps ran."""
    plan, v = _assembled(state)
    notes = [*plan.notes]
    for part in (state.fsr, v, state.old):
        notes += part.notes if part is not None else []
    if plan.tagTarget:
        notes.append(
            f"tagged {plan.targetInstanceId} {tags.ARRAY}={plan.array}: backups of "
            f"{plan.array} now follow the restored array"
        )
    return notes


def _record_identity(
    plan: Plan, v: Volumes, new_uuid: str, notes: list[str], warnings: list[str]
) -> None:
    """Tag the restored volumes with the array's own md UUID (raidsnap:md-uuid): what a replace
    after this one releases, and what a backup records when discovery cannot run. The array is
    the user's by now: a tag that cannot be written is a warning, nothing is undone for it."""
    if not new_uuid or new_uuid == plan.mdUuid:
        return
    notes.append(
        f"the restored array has its own md UUID {new_uuid} (the set's was {plan.mdUuid}): "
        "old members of the set's array can never join it at a boot"
    )
    try:
        tagging.add(v.ids, tags.MD_UUID, new_uuid)
    except ClientError as err:
        warnings.append(
            f"could not tag {v.ids} {tags.MD_UUID}={new_uuid} ({error_code(err)}); the next "
            "backup records the array's md UUID from the instance"
        )
    key = tags.array_key(plan.array)
    try:
        followed = identity.follow_on_instance(plan, new_uuid)
    except ClientError as err:
        warnings.append(
            f"could not tag {plan.targetInstanceId} {key}={new_uuid} ({error_code(err)}); "
            f"until it names the restored array, backups of {plan.array} fail ArrayNotFound: "
            f"tag it so (or {key}=<its mount point>)"
        )
        return
    if followed:
        notes.append(followed)


def _assembled(state: RestoreState) -> tuple[Plan, Volumes]:
    """The plan and the volumes, which every run that assembled its array has."""
    if state.plan is None or state.volumes is None:
        raise ValueError("finish needs the run's plan and volumes; the run has not assembled")
    return state.plan, state.volumes


_SLOW_READS = (
    "the array is assembled, mounted and usable, but blocks not yet read come from S3 slowly "
    "on first access; run the prewarm document when convenient"
)


def _prewarm_outcome(
    state: RestoreState, v: Volumes, warnings: list[str]
) -> dict[str, JsonValue] | None:
    """What became of the prewarm, and how far it got, in words for the output's warnings."""
    prewarm, error = state.prewarm, state.prewarmError
    ids = ",".join(v.ids)
    if prewarm is None:
        if error is None:
            return None
        reason = cause_message(error.Cause) or error.Error
        warnings.append(
            f"the prewarm was not started ({public_name(error.Error)}: "
            f"{reason}); {_SLOW_READS} (VolumeIds {ids})"
        )
        return {"status": "not-started", "reason": reason}
    status, result, tail = prewarm.status, prewarm.result, prewarm.stderrTail or ""
    if error is not None:
        # The prewarm was started but could not be followed: one more look, best effort.
        command_id, instance_id = prewarm.commandId, prewarm.instanceId
        try:
            looked = commands.fetch(command_id, instance_id)
        except ClientError as err:
            why = f"{error.Error}, then {error_code(err)}"
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
        status, result, tail = looked.status, looked.result, looked.stderr_tail()
    if status == "success":
        return {"status": "success", "result": result}
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


def _member_initialization(v: Volumes) -> list[str]:
    """How each member's volume was initialized, in member order: fsr for a volume EC2 fast
    restored, prewarm for one read on the instance, else the run's initialization."""
    fast = v.fastRestored or [False] * len(v.ids)
    prewarmed = set(v.prewarmVolumeIds or [])
    ways = v.members or [v.initialization] * len(v.ids)
    out = []
    for vid, fast_restored, way in zip(v.ids, fast, ways, strict=True):
        if vid in prewarmed:
            out.append("prewarm")
        elif way == "fsr" and fast_restored:
            out.append("fsr")
        else:
            out.append(way)
    return out
