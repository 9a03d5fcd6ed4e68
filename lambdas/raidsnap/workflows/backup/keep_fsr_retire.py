"""Backup, fastRestore policy: once the new set's FSR is ready, turn off the FSR of the sets it
replaced; when the array has no policy any more, turn off all the FSR the policy kept."""

from __future__ import annotations

from raidsnap.aws import kept_fsr
from raidsnap.environment import FastRestorePolicy
from raidsnap.observability import logger
from raidsnap.plan import kept_fsr as plan
from raidsnap.workflows.backup.contracts import FastRestoreReport, KeepFsr, KeepFsrCall


def _later(turned: tuple[list[str], list[str]]) -> tuple[list[str], list[str]]:
    """A set a restore holds stays on; the array's next backup (or the sweeper) retires it."""
    off, notes = turned
    return off, [f"{n}; a later backup turns it off" for n in notes]


def retire(call: KeepFsrCall, k: KeepFsr, policy: FastRestorePolicy | None, table: str) -> KeepFsr:
    """The new set is ready: it is kept, and the sets beyond the newest ``sets`` go off."""
    array = call.plan.array
    claim = kept_fsr.change(table, array, lambda sets: plan.marked_kept(sets, str(k.setId)))
    keep = policy.sets if policy is not None else 1
    off, notes = _later(kept_fsr.turn_off(table, array, plan.to_retire(claim.sets, keep)))
    left = [s.set_id for s in claim.sets if s.set_id not in off]
    logger.info("fastRestore policy kept the new set", extra={"kept": left, "retired": off})
    k.status = "kept"
    k.report = FastRestoreReport(
        status="kept",
        setId=k.setId,
        zones=k.zones,
        keptSets=left,
        retiredSets=off,
        notes=[*k.notes, *notes],
    )
    return k


def retire_all(array: str, table: str) -> KeepFsr:
    """The array has no fastRestore policy (any more): what the policy kept goes off."""
    claim = kept_fsr.read(table, array)
    if not claim.sets:
        return KeepFsr(status="off")
    off, notes = _later(kept_fsr.turn_off(table, array, claim.sets))
    return KeepFsr(
        status="removed",
        report=FastRestoreReport(
            status="removed",
            keptSets=[s.set_id for s in claim.sets if s.set_id not in off],
            retiredSets=off,
            notes=[
                "the array has no fastRestore policy any more: the FSR it kept was disabled",
                *notes,
            ],
        ),
    )
