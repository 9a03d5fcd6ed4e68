"""Restore failure path: remove what this run made, and only that; then name the failure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from botocore.exceptions import ClientError

from raidsnap import tags
from raidsnap.aws import (
    commands,
    created,
    error_code,
    instances,
    kept_fsr,
    lock,
    tagging,
    volumes,
)
from raidsnap.environment import RestoreDocuments, RestoreSettings
from raidsnap.errors import cause_message, public_name
from raidsnap.models import Poll
from raidsnap.observability import count, for_array, logger
from raidsnap.plan import cleanup as plan_cleanup
from raidsnap.plan import fsr as plan_fsr
from raidsnap.plan import volumes as plan_volumes
from raidsnap.workflows.restore import identity, put_back
from raidsnap.workflows.restore.commands import RELEASE_TIMEOUT_SECONDS
from raidsnap.workflows.restore.contracts import Cleanup, Confirm, Plan, RestoreState, StateCall

CLEANUP_POLL_SECONDS = 5
# Cleanup asks for a normal detach first, and forces it after this many looks.
CLEANUP_FORCE_AFTER = 6
CLEANUP_MAX_LOOKS = 120
DISCOVER_TIMEOUT_SECONDS = 120


def _progress(state: RestoreState) -> Cleanup:
    """The cleanup so far, one look further; the failure it names is set on the first look."""
    c = state.cleanup
    if c is None:
        error = state.error
        c = Cleanup(
            error=public_name(error.Error if error else "States.Runtime"),
            cause=cause_message(error.Cause if error else ""),
            looks=0,
        )
    return c.model_copy(update={"looks": c.looks + 1})


def _fsr_disabled_already(state: RestoreState) -> bool:
    """Has a step of the run disabled its FSR already (the fallback, or CheckVolumes once the
    volumes existed)?"""
    return bool(
        (state.fsr is not None and state.fsr.disabled)
        or (state.volumes is not None and state.volumes.fsrDisabled)
    )


def _disable_run_fsr(state: RestoreState, table: str, c: Cleanup, arn: str) -> None:
    """FSR this run enabled and has not disabled yet: from the state, and from the lock item,
    which has the pairs even when the step that enabled them lost EC2's answer; but never a
    pair the array's fastRestore policy took over since (it keeps that one on)."""
    if state.plan is None:
        return
    array, zone = state.plan.array, state.plan.availabilityZone
    ours = set(state.fsr.ours if state.fsr else [])
    claim = lock.fsr_claim(table, arn)
    if claim is not None:
        ours |= set(plan_fsr.in_zone(claim.pairs, zone))
    if ours:
        left = kept_fsr.disable_unkept(table, array, ours, zone)
        c.fsrDisabled = sorted(ours - set(left))
    c.fsrDone = True


def _run_volumes(
    state: RestoreState, table: str, arn: str, run: str
) -> tuple[dict[str, plan_volumes.VolumeView], list[str]]:
    """Only this run's volumes: those it recorded creating (raidsnap.aws.created), which its
    state and its tags must name too; and, apart, the volumes that carry its tags but that it
    never recorded, which it leaves alone and reports (tags prove nothing: anyone may write
    them). A run that failed before Prepare chose its nonce created nothing; an earlier
    execution of the same name is another run."""
    mine = created.recorded(table, arn, run)
    known = set(state.volumes.ids if state.volumes else []) | mine
    views = volumes.created_by(arn, run) if arn and run else {}
    views |= volumes.describe(known - set(views))
    unknown = sorted(vid for vid in views if vid not in mine)
    return {vid: v for vid, v in views.items() if vid in mine}, unknown


def cleanup(call: StateCall, settings: RestoreSettings, documents: RestoreDocuments) -> Cleanup:
    """Remove what this run made, and only that; then name the failure.

    Called in a loop by the workflow: each call detaches what is still attached (forcing it
    after a while), deletes what is detached, and says how long to wait for the rest. A volume
    attached to the target is detached only once the instance has confirmed that no md device
    and no mount uses it (discover, then release of an unmounted array of this run's volumes);
    where it cannot confirm that, the volume is left attached and the cause says so."""
    state = call.state
    plan = state.plan
    c = _progress(state)
    arn = state.execution.id
    zone = plan.availabilityZone if plan else None
    array = plan.array if plan else None

    if array and zone and not c.fsrDone and not _fsr_disabled_already(state):
        _disable_run_fsr(state, settings.lock_table, c, arn)
    run = plan.run if plan else ""
    views, c.unknown = _run_volumes(state, settings.lock_table, arn, run)
    target = plan.targetInstanceId if plan else ""
    on_target = sorted(
        vid
        for vid, view in views.items()
        if plan_volumes.owned_by(view, arn, run)
        and view.state not in ("deleting", "deleted")
        and plan_cleanup.attached_to(view, target)
    )
    if plan and on_target and (c.confirm is None or c.confirm.status not in ("free", "kept")):
        c.confirm = _confirm_step(plan, c, on_target, documents)
        if c.confirm.status == "pending":
            return c.model_copy(update={"status": "pending", "waitSeconds": CLEANUP_POLL_SECONDS})
    keep = set(on_target) if c.confirm is not None and c.confirm.status == "kept" else set()
    progress: dict[str, object] = {
        "detachAsks": dict(c.detachAsks or {}),
        "deleted": list(c.deleted or []),
    }
    pending = volumes.remove_created(
        views, arn, run, progress, force_after=CLEANUP_FORCE_AFTER, keep=keep
    )
    c = c.model_copy(update=progress)
    if pending and c.looks < CLEANUP_MAX_LOOKS:
        return c.model_copy(update={"status": "pending", "waitSeconds": CLEANUP_POLL_SECONDS})
    if plan and plan.mode == "replace" and c.release is None:
        c.release = put_back.release_answer(state)
        if c.release is None and c.looks < CLEANUP_MAX_LOOKS:  # the release still runs
            return c.model_copy(update={"status": "pending", "waitSeconds": CLEANUP_POLL_SECONDS})
    if put_back.released(plan, c.release) and plan and not pending and not keep:
        # The replace took the array out of service: with this run's volumes gone, nothing else
        # on the instance carries its md UUID, and it goes back as it was.
        c.putBack = put_back.step(plan, state, c.release or {}, c.putBack, documents)
        if c.putBack.status == "pending" and c.looks < CLEANUP_MAX_LOOKS:
            return c.model_copy(update={"status": "pending", "waitSeconds": CLEANUP_POLL_SECONDS})
    return _done(state, settings.lock_table, c, sorted(keep), pending)


def _done(state: RestoreState, table: str, c: Cleanup, kept: list[str], left: list[str]) -> Cleanup:
    """The last look: the tag this run put on a new target goes (unless its volumes stay
    there), the lock is released, and the cause says what was done and what was not."""
    plan, arn = state.plan, state.execution.id
    array = plan.array if plan else None
    if array and plan and plan.tagTarget and plan.targetInstanceId and not kept:
        _untag_target(plan.targetInstanceId, array)
    if array and arn:
        lock.release(table, array, arn)
    run = plan.run if plan else ""
    if not kept and not left and created.recorded(table, arn, run) <= set(c.deleted or []):
        created.drop(table, arn, run)  # nothing it names is left: the sweeper has no use for it
    c.status = "done"
    c.kept = kept
    c.cause = c.cause + _cleanup_summary(state, c, left)
    logger.info("restore cleaned up", extra={"deleted": c.deleted, "left": left, "kept": kept})
    if array:
        for_array(array)
    count("RestoreFailed")
    return c


def _confirm_step(plan: Plan, c: Cleanup, ours: list[str], documents: RestoreDocuments) -> Confirm:
    """The confirmation one look further; still pending after the cleanup's last look, the
    volumes are kept."""
    confirm = _confirm_free(plan, c.confirm, ours, documents)
    if confirm.status == "pending" and c.looks >= CLEANUP_MAX_LOOKS:
        return confirm.model_copy(
            update={"status": "kept", "reason": "the instance did not answer in time"}
        )
    return confirm


def _confirm_free(
    plan: Plan, confirm: Confirm | None, ours: list[str], documents: RestoreDocuments
) -> Confirm:
    """One step of asking the target whether any md device or mount uses this run's attached
    volumes: discover (read only); then release each array of them that is not mounted (the
    set's md UUID, so that release refuses anything else). A mounted array is the user's and
    is never released here. Returns the confirmation with status pending, free or kept."""
    target = plan.targetInstanceId
    if confirm is None:
        params = {"ArrayName": plan.array}
        return _send(plan, None, "discover", documents.discover, params)

    def kept(reason: str) -> Confirm:
        return confirm.model_copy(update={"status": "kept", "reason": reason})

    looked = commands.fetch(str(confirm.commandId), target)
    if looked.status == "pending":
        poll = Poll(CLEANUP_POLL_SECONDS, int(confirm.budgetSeconds or 0)).waited()
        if poll.spent:
            return kept(f"{confirm.phase} did not finish on {target}")
        return confirm.model_copy(update={"budgetSeconds": poll.budget_seconds})
    answer = looked.result or {}
    if looked.status == "failed":
        what = answer.get("error") or looked.detail
        return kept(
            f"{confirm.phase} failed on {target} ({what}: "
            f"{answer.get('message') or looked.stderr_tail(2)})"
        )
    if confirm.phase == "discover":
        arrays = answer.get("arrays") or []
        reason, queue = plan_cleanup.arrays_holding(arrays, ours, plan.restoredMdUuids)
        if reason is not None:
            _record_kept_identity(plan, arrays, ours)
            return kept(reason)
        uuids = {str(md.get("device")): str(md.get("uuid") or "") for md in arrays}
    else:
        queue = list(confirm.queue or [])[1:]
        uuids = dict(confirm.queueUuids or {})
    if not queue:
        return confirm.model_copy(update={"status": "free"})
    params = {
        "MdDevice": queue[0],
        "MountPoint": plan.mountPoint,
        "MdUuid": uuids.get(queue[0]) or plan.newMdUuid or plan.mdUuid,
        "OwnMountPoint": "true" if plan.ownMountPoint else "false",
    }
    sent = _send(plan, confirm, "release", documents.release, params, queue=queue)
    return sent.model_copy(update={"queueUuids": uuids}) if sent.status == "pending" else sent


_TIMEOUTS = {"discover": DISCOVER_TIMEOUT_SECONDS, "release": RELEASE_TIMEOUT_SECONDS}


def _record_kept_identity(plan: Plan, arrays: list[Mapping[str, Any]], ours: list[str]) -> None:
    """A run that failed after its array was assembled under its new identity and mounted keeps
    it (it is the user's): tag its volumes with that md UUID, as Finish would have, so that a
    replace after this one knows what to release. Best effort: the tag is a record, not a
    condition of anything this run does."""
    for md in arrays:
        members = [str(m.get("volumeId")) for m in md.get("members") or []]
        if md.get("uuid") == plan.newMdUuid and plan.newMdUuid and set(members) <= set(ours):
            try:
                tagging.add(members, tags.MD_UUID, plan.newMdUuid)
                identity.follow_on_instance(plan, plan.newMdUuid)
            except ClientError as err:
                logger.warning(
                    "could not tag the kept array's volumes or its instance",
                    extra={"error": error_code(err)},
                )


def _send(
    plan: Plan,
    confirm: Confirm | None,
    phase: Literal["discover", "release"],
    document: str,
    params: dict[str, str],
    *,
    queue: list[str] | None = None,
) -> Confirm:
    """Start one phase of the confirmation; one that cannot be sent keeps the volumes."""
    target = plan.targetInstanceId
    timeout = _TIMEOUTS[phase]
    try:
        command_id = commands.send(
            document, target, params, comment=f"raidsnap cleanup {plan.setId}", timeout=timeout
        )
    except ClientError as err:
        reason = f"{document} could not be sent to {target} ({error_code(err)})"
        if confirm is None:
            return Confirm(status="kept", reason=reason)
        return confirm.model_copy(update={"status": "kept", "reason": reason})
    sent = Confirm(status="pending", phase=phase)
    if queue is not None:
        sent.queue = queue
    sent.commandId = command_id
    sent.budgetSeconds = timeout + 30
    return sent


def _cleanup_summary(state: RestoreState, c: Cleanup, left: list[str]) -> str:
    plan = state.plan
    run = plan.run if plan else None
    parts = []
    if c.deleted:
        parts.append(f"deleted the {len(c.deleted)} volumes this run created")
    if c.fsrDisabled:
        parts.append(f"disabled the FSR it enabled ({len(c.fsrDisabled)} snapshots)")
    if c.kept:
        parts.append(
            f"left volumes {c.kept} attached to {plan.targetInstanceId if plan else None} as "
            f"they are, because the instance did not confirm that nothing uses them: "
            f"{c.confirm.reason if c.confirm else None}. They are this run's (tagged "
            f"{tags.RESTORE_RUN}={run}): keep the array, or release it and delete "
            "them by hand"
        )
    if c.unknown:
        parts.append(
            f"left volumes {c.unknown} as they are: they carry this run's tags, but the run "
            "never recorded creating them, so they are not known to be its own; find out who "
            "created them before deleting any"
        )
    if left:
        parts.append(
            f"could not remove volumes {left} in time: delete them by hand (tagged "
            f"{tags.RESTORE_RUN}={run})"
        )
    parts += put_back.old_array(state, c, left)
    if not parts:
        return ""
    return " [cleanup: " + "; ".join(parts) + "; snapshots untouched]"


def _untag_target(instance_id: str, array: str) -> None:
    """Take off the tag this run put on its target, if it got that far: DeleteTags with a value
    removes it only when it matches, and the grant allows it only on an instance that carries
    the tag (a run that failed before its attach step never tagged the target)."""
    if instances.instance_facts(instance_id)[1].get(tags.ARRAY) == array:
        tagging.remove([instance_id], tags.ARRAY, array)
