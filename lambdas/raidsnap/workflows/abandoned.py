"""After a restore that was stopped by hand or ran out of time.

Such a run never reaches its Catch, so its own cleanup never runs. This turns off the Fast
Snapshot Restore it enabled, releases its lock, and deletes the volumes it created that are not
attached: those it recorded creating (raidsnap.aws.created) and whose tags name the run. A
volume that is attached is left alone and reported: the run may have been stopped after the
array was assembled and mounted, and taking it away could destroy data in use. A volume tagged
as the run's that it never recorded is left alone and reported as unknown: tags prove nothing.
Once nothing the record names is left, the record goes. The array's tag the run put on a new
target goes too, if the run never reached its Assemble step: nothing of the array can be
there, and the tag would say it lives on an instance that holds none of it."""

from __future__ import annotations

import json

from pydantic import Field

from raidsnap import tags
from raidsnap.aws import (
    created,
    executions,
    instances,
    kept_fsr,
    lock,
    run_secret,
    tagging,
    volumes,
)
from raidsnap.environment import RestoreSettings
from raidsnap.errors import RaidsnapError
from raidsnap.execution_events import StatusChange, StatusChangeDetail
from raidsnap.models import Contract
from raidsnap.observability import logger
from raidsnap.plan.cleanup import disposition
from raidsnap.plan.fsr import by_zone
from raidsnap.plan.volumes import VolumeView, owned_by

__all__ = ["ENDED_WITHOUT_CATCH", "Cleaned", "CleanupPendingError", "StatusChange", "clean_up"]

ENDED_WITHOUT_CATCH = ("ABORTED", "TIMED_OUT")
# restore.asl.json: the step that tags a new target with the array, and the one that assembles.
PREPARE_STATE, ATTACH_STATE, ASSEMBLE_STATE = "Prepare", "AttachVolumes", "Assemble"


class CleanupPendingError(RaidsnapError):
    """Volumes of the run are still detaching: the invocation is retried."""


class Cleaned(Contract):
    """What the clean-up did (the Lambda's answer, for the logs and whoever invoked it)."""

    executionArn: str
    status: str
    cleaned: bool
    deletedVolumeIds: list[str] = Field(default_factory=list)
    attachedVolumeIds: list[str] = Field(default_factory=list)
    # Tagged as the run's, never recorded by it: left alone.
    unknownVolumeIds: list[str] = Field(default_factory=list)
    fsrDisabled: list[str] = Field(default_factory=list)
    lockReleased: list[str] = Field(default_factory=list)
    # The new target whose array tag the run had put on it, taken off (it never assembled).
    untagged: str | None = None


def _array_of(detail: StatusChangeDetail) -> str | None:
    try:
        value = json.loads(detail.input or "{}")
    except json.JSONDecodeError:
        return None
    array = value.get("array") if isinstance(value, dict) else None
    return array if isinstance(array, str) and array else None


def _disable_own_fsr(table: str, arn: str) -> list[str]:
    """The FSR this run claimed, from its own record (a lock taken over since does not hide it),
    except pairs another run has claimed since (that run uses them, and disables them itself)
    and pairs the array's fastRestore policy took over (it keeps them on)."""
    claims = lock.fsr_claims(table)
    mine = next((c for c in claims if c.execution_arn == arn), None)
    if mine is None:
        return []
    others = {p for c in claims if c.execution_arn != arn for p in c.pairs}
    disabled: list[str] = []
    for zone, snapshot_ids in sorted(by_zone(p for p in mine.pairs if p not in others).items()):
        left = kept_fsr.disable_unkept(table, mine.array, snapshot_ids, zone)
        disabled += sorted(set(snapshot_ids) - set(left))
    return disabled


def _release_locks(table: str, arn: str, names: set[str | None]) -> list[str]:
    released: list[str] = []
    for array in sorted(n for n in names if n):
        holder = lock.current(table, array)
        if holder is None or holder.execution_arn != arn:
            continue
        if lock.release(table, array, arn):
            released.append(array)
    return released


def _remove(
    views: dict[str, VolumeView], mine: frozenset[str], arn: str, run: str
) -> dict[str, list[str]]:
    """Delete the run's recorded volumes that are detached; say what became of each volume
    tagged as the run's: deleted, attached, pending (on its way) or unknown (not recorded)."""
    found: dict[str, list[str]] = {k: [] for k in ("deleted", "attached", "pending", "unknown")}
    for vid, view in sorted(views.items()):
        if not owned_by(view, arn, run):
            continue
        if vid not in mine:
            found["unknown"].append(vid)
            continue
        state = disposition(view)
        if state == "attached":
            found["attached"].append(vid)
        elif state in ("detaching", "creating"):
            found["pending"].append(vid)
        elif state == "deletable":
            volumes.delete(vid)
            found["deleted"].append(vid)
    return found


def clean_up(event: StatusChange, settings: RestoreSettings) -> Cleaned:
    """Handle one "Step Functions Execution Status Change" event of the restore workflow."""
    detail = event.detail or StatusChangeDetail()
    arn = detail.executionArn or ""
    status = detail.status or ""
    if not arn or status not in ENDED_WITHOUT_CATCH:
        return Cleaned(executionArn=arn, status=status, cleaned=False)
    table = settings.lock_table
    # This run's volumes only: a later execution may have the same name, hence the same ARN.
    run = run_secret.nonce(arn, detail.startDate) if detail.startDate else ""
    mine = created.recorded(table, arn, run)
    views = volumes.created_by(arn, run) if run else {}
    views |= volumes.describe(mine - set(views))
    names = {v.tags.get(tags.ARRAY) for v in views.values()} | {_array_of(detail)}
    fsr_disabled = _disable_own_fsr(table, arn)
    released = _release_locks(table, arn, names)
    untagged = _untag_unassembled_target(arn)
    found = _remove(views, mine, arn, run)
    pending = found["pending"]
    result = Cleaned(
        executionArn=arn,
        status=status,
        cleaned=True,
        deletedVolumeIds=found["deleted"],
        attachedVolumeIds=found["attached"],
        unknownVolumeIds=found["unknown"],
        fsrDisabled=fsr_disabled,
        lockReleased=released,
        untagged=untagged,
    )
    if result.attachedVolumeIds:
        logger.warning(
            "volumes of a stopped restore are attached and were left alone",
            extra={"execution": arn, "volumes": result.attachedVolumeIds},
        )
    if result.unknownVolumeIds:
        logger.warning(
            "volumes tagged as a stopped restore's that it never recorded were left alone",
            extra={"execution": arn, "volumes": result.unknownVolumeIds},
        )
    if pending:
        raise CleanupPendingError(
            f"volumes {pending} of {arn} are still detaching or creating; retried shortly"
        )
    if mine and mine <= set(result.deletedVolumeIds) | _gone(mine, views):
        created.drop(table, arn, run)
    return result


def _gone(mine: frozenset[str], views: dict[str, VolumeView]) -> set[str]:
    """Recorded volumes EC2 shows deleting or deleted. One it does not show at all may be one
    not yet visible (EC2 is eventually consistent): its record stays for the sweeper."""
    return {vid for vid in mine if vid in views and disposition(views[vid]) == "gone"}


def _untag_unassembled_target(arn: str) -> str | None:
    """The run's history: its plan (Prepare's result: the target, and whether the run makes it
    the array's instance) and how far it got. A run that entered its attach step with a target
    to tag, and never its Assemble step, tagged an instance that holds nothing of the array:
    that tag goes (only that key, only with the array's value, only if the instance has it)."""
    plan: dict[str, object] = {}
    reached: set[str] = set()
    for event in executions.history(arn):
        exited = event.get("stateExitedEventDetails") or {}
        if exited.get("name") == PREPARE_STATE:
            found = json.loads(exited.get("output") or "{}").get("plan")
            plan = found if isinstance(found, dict) else {}
        entered = event.get("stateEnteredEventDetails") or {}
        reached.add(str(entered.get("name", "")))
    target, array = plan.get("targetInstanceId"), plan.get("array")
    if not plan.get("tagTarget") or ATTACH_STATE not in reached or ASSEMBLE_STATE in reached:
        return None
    if not isinstance(target, str) or not isinstance(array, str):
        return None
    if instances.instance_facts(target)[1].get(tags.ARRAY) != array:
        return None
    tagging.remove([target], tags.ARRAY, array)
    logger.info(
        "array tag taken off a target the stopped run never assembled on", extra={"target": target}
    )
    return target
