"""Restore failure path: remove what this run made, and only that; then name the failure."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from raidsnap import tags
from raidsnap.aws import commands, error_code, fsr, lock, tagging, volumes
from raidsnap.environment import RestoreDocuments, RestoreSettings
from raidsnap.errors import cause_message, public_name
from raidsnap.models import Poll
from raidsnap.observability import count, for_array, logger
from raidsnap.plan import cleanup as plan_cleanup
from raidsnap.plan import fsr as plan_fsr
from raidsnap.plan import volumes as plan_volumes
from raidsnap.workflows.restore.commands import RELEASE_TIMEOUT_SECONDS

State = dict[str, Any]

CLEANUP_POLL_SECONDS = 5
# Cleanup asks for a normal detach first, and forces it after this many looks.
CLEANUP_FORCE_AFTER = 6
CLEANUP_MAX_LOOKS = 120
DISCOVER_TIMEOUT_SECONDS = 120


def _progress(state: State) -> dict[str, Any]:
    """The cleanup so far, one look further; the failure it names is set on the first look."""
    c = dict(state.get("cleanup") or {})
    error = state.get("error") or {}
    c.setdefault("error", public_name(str(error.get("Error", "States.Runtime"))))
    c.setdefault("cause", cause_message(str(error.get("Cause", ""))))
    c.setdefault("looks", 0)
    c["looks"] += 1
    return c


def _disable_run_fsr(state: State, table: str, c: dict[str, Any], arn: str, zone: str) -> None:
    """FSR this run enabled and has not disabled yet: from the state, and from the lock item,
    which has the pairs even when the step that enabled them lost EC2's answer."""
    ours = set((state.get("fsr") or {}).get("ours") or [])
    claim = lock.fsr_claim(table, arn)
    if claim is not None:
        ours |= set(plan_fsr.in_zone(claim.pairs, zone))
    if ours:
        fsr.disable(sorted(ours), zone)
        c["fsrDisabled"] = sorted(ours)
    c["fsrDone"] = True


def _run_volumes(state: State, arn: str, run: str) -> dict[str, plan_volumes.VolumeView]:
    """Only this run's volumes: those its state recorded, and those tagged with its nonce (a
    CreateVolume whose answer was lost). A run that failed before Prepare chose its nonce
    created nothing; an earlier execution of the same name is another run."""
    known = set((state.get("volumes") or {}).get("ids") or [])
    views = volumes.created_by(arn, run) if arn and run else {}
    return views | volumes.describe(known - set(views))


def cleanup(state: State, settings: RestoreSettings, documents: RestoreDocuments) -> dict[str, Any]:
    """Remove what this run made, and only that; then name the failure.

    Called in a loop by the workflow: each call detaches what is still attached (forcing it
    after a while), deletes what is detached, and says how long to wait for the rest. A volume
    attached to the target is detached only once the instance has confirmed that no md device
    and no mount uses it (discover, then release of an unmounted array of this run's volumes);
    where it cannot confirm that, the volume is left attached and the cause says so."""
    c = _progress(state)
    arn = str((state.get("execution") or {}).get("id", ""))
    zone = state.get("availabilityZone")
    array = state.get("array")

    if array and zone and not c.get("fsrDone") and not (state.get("fsr") or {}).get("disabled"):
        _disable_run_fsr(state, settings.lock_table, c, arn, str(zone))
    run = str(state.get("run") or "")
    views = _run_volumes(state, arn, run)
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
        tagging.remove([target], tags.ARRAY, array)
    if array and arn:
        lock.release(settings.lock_table, array, arn)
    c["status"] = "done"
    c["kept"] = sorted(keep)
    c["cause"] = c["cause"] + _cleanup_summary(state, c, pending)
    logger.info(
        "restore cleaned up", extra={"deleted": c["deleted"], "left": pending, "kept": c["kept"]}
    )
    if array:
        for_array(str(array))
    count("RestoreFailed")
    return c


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

    if not confirm:
        params = {"ArrayName": state["array"]}
        return _send(state, confirm, "discover", documents.discover, params)
    looked = commands.fetch(confirm["commandId"], target)
    if looked.status == "pending":
        poll = Poll(CLEANUP_POLL_SECONDS, int(confirm["budgetSeconds"])).waited()
        if poll.spent:
            return kept(f"{confirm['phase']} did not finish on {target}")
        return dict(confirm, budgetSeconds=poll.budget_seconds)
    answer = looked.result or {}
    if looked.status == "failed":
        what = answer.get("error") or looked.detail
        return kept(
            f"{confirm['phase']} failed on {target} ({what}: "
            f"{answer.get('message') or looked.stderr_tail(2)})"
        )
    if confirm["phase"] == "discover":
        reason, queue = plan_cleanup.arrays_holding(
            answer.get("arrays") or [], ours, state["mdUuid"]
        )
        if reason is not None:
            return kept(reason)
    else:
        queue = list(confirm.get("queue") or [])[1:]
    if not queue:
        return dict(confirm, status="free")
    params = {"MdDevice": queue[0], "MountPoint": state["mountPoint"], "MdUuid": state["mdUuid"]}
    return _send(state, confirm, "release", documents.release, params, queue=queue)


_TIMEOUTS = {"discover": DISCOVER_TIMEOUT_SECONDS, "release": RELEASE_TIMEOUT_SECONDS}


def _send(
    state: State,
    confirm: dict[str, Any],
    phase: str,
    document: str,
    params: dict[str, str],
    *,
    queue: list[str] | None = None,
) -> dict[str, Any]:
    """Start one phase of the confirmation; one that cannot be sent keeps the volumes."""
    target = state["targetInstanceId"]
    timeout = _TIMEOUTS[phase]
    try:
        command_id = commands.send(
            document, target, params, comment=f"raidsnap cleanup {state['setId']}", timeout=timeout
        )
    except ClientError as err:
        reason = f"{document} could not be sent to {target} ({error_code(err)})"
        return dict(confirm, status="kept", reason=reason)
    sent: dict[str, Any] = {"status": "pending", "phase": phase}
    if queue is not None:
        sent["queue"] = queue
    return sent | {"commandId": command_id, "budgetSeconds": timeout + 30}


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
