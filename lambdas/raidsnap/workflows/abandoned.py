"""After a restore that was stopped by hand or ran out of time.

Such a run never reaches its Catch, so its own cleanup never runs. This turns off the Fast
Snapshot Restore it enabled, releases its lock, and deletes the volumes it created that are not
attached: those it recorded creating (raidsnap.aws.created) and whose tags name the run. A
volume that is attached is left alone and reported: the run may have been stopped after the
array was assembled and mounted, and taking it away could destroy data in use. A volume tagged
as the run's that it never recorded is left alone and reported as unknown: tags prove nothing.
Once nothing the record names is left, the record goes."""

from __future__ import annotations

import json

from pydantic import Field

from raidsnap import tags
from raidsnap.aws import created, kept_fsr, lock, run_secret, volumes
from raidsnap.environment import RestoreSettings
from raidsnap.errors import RaidsnapError
from raidsnap.models import Contract, StatusChange, StatusChangeDetail
from raidsnap.observability import logger
from raidsnap.plan.cleanup import disposition
from raidsnap.plan.fsr import by_zone
from raidsnap.plan.volumes import VolumeView, owned_by

__all__ = ["ENDED_WITHOUT_CATCH", "Cleaned", "CleanupPendingError", "StatusChange", "clean_up"]

ENDED_WITHOUT_CATCH = ("ABORTED", "TIMED_OUT")


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
