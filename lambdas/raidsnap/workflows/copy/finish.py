"""Copy, last steps: record the copied set complete, lock the newest copied sets (this stack's
lock policy for the array, as the backup locks its own), and keep the configured number of
complete sets here, never asking to delete one a lock holds; or, on failure, delete exactly the
copies this run recorded and forget its record."""

from __future__ import annotations

from datetime import UTC, datetime

from raidsnap import environment
from raidsnap.aws import copies, in_use, manifests, snapshot_sets, snapshots
from raidsnap.errors import CopyFailedError, cause_message, public_name
from raidsnap.observability import count, for_array, logger
from raidsnap.plan import retention
from raidsnap.set_locks import held_back, lock_newest
from raidsnap.workflows.copy.contracts import (
    CopyCall,
    CopyFailure,
    CopyFailureCall,
    CopyOutput,
    CopyPlan,
    CopyRetention,
)
from raidsnap.workflows.copy.progress import adopt_unrecorded, ours, run_start


def finish(call: CopyCall) -> CopyOutput:
    """Every copy is completed: from now on they are the set here, complete like a local one."""
    plan = call.plan
    for_array(plan.array)
    if not plan.alreadyCopied:
        manifest = ours(plan)
        seen = copies.look(manifest.snapshots.values())
        unfinished = sorted(
            c for c in manifest.snapshots.values() if c not in seen or seen[c].state != "completed"
        )
        if len(manifest.snapshots) != len(plan.members) or unfinished:
            raise CopyFailedError(f"copies {unfinished} of {plan.setId} are not completed")
        manifests.complete(manifest, manifest.snapshots, manifest.started or run_start(plan))
    current = snapshot_sets.get_set(plan.array, plan.setId)
    locks = lock_newest(
        plan.array,
        f"the copied set {plan.setId} is complete here, and retention here did not run. "
        "The next copy tries again",
        origin=f"{plan.sourceAccount}/{plan.sourceRegion}",
    )
    kept = _retention(plan)
    count("SetCopied")
    return CopyOutput(
        array=plan.array,
        setId=plan.setId,
        region=plan.region,
        source={"region": plan.sourceRegion, "account": plan.sourceAccount},
        snapshotIds=[m.snapshot_id for m in current.by_index()] if current else [],
        retention=kept,
        locks=locks,
        notes=["this set was copied here by an earlier run"] if plan.alreadyCopied else [],
    )


def _retention(plan: CopyPlan) -> CopyRetention:
    """Keep the newest complete sets of the array copied here from the same source (account
    and Region) as this one: as many as this stack's config says (the request may ask for more,
    never fewer). Sets taken here, and copies from another source, are not counted or touched;
    a restore's set and a set being copied stay."""
    origin = f"{plan.sourceAccount}/{plan.sourceRegion}"
    sets = [s for s in snapshot_sets.listing(plan.array).sets if s.origin == origin]
    keep = environment.copies_retention(plan.array, plan.retention)
    now = datetime.now(UTC)
    decided = retention.plan(sets, keep, in_use.sets_in_use(sets, now), now)
    deletable, held = held_back(decided.delete)
    deleted: list[str] = []
    refused: list[str] = []
    for s in deletable:
        logger.info("copy retention deletes set", extra={"set_id": s.set_id})
        gone, kept = snapshots.delete_set(s)
        deleted += gone
        refused += [f"{r.snapshot_id} ({r.code}: {r.message})" for r in kept]
    return CopyRetention(
        keep=keep,
        keptSets=[s.set_id for s in decided.keep],
        deletedSets=[s.set_id for s in deletable],
        deletedSnapshots=len(deleted),
        notDeleted=refused,
        heldSets=held,
    )


def explain_failure(call: CopyFailureCall) -> CopyFailure:
    """Delete the copies this run made (recorded, or found with its tag and of this set's source
    snapshots), forget its record, and name the failure. A set this run recorded complete stays:
    it is whole, whatever failed after."""
    state = call.state
    error = state.error
    name = public_name(error.Error if error else "States.Runtime")
    cause = cause_message(error.Cause if error else "")
    deleted: list[str] = []
    plan = state.plan
    if plan is not None and not plan.alreadyCopied:
        for_array(plan.array)
        found = manifests.get(plan.array, plan.setId)
        mine = found if found is not None and found.execution_arn == plan.executionArn else None
        if mine is not None and mine.status == "taken":
            cause += f". The copied set {plan.setId} was recorded complete here and stays"
        else:
            made = adopt_unrecorded(plan, dict(mine.snapshots) if mine else {}, run_start(plan))
            deleted, refused = copies.delete(made.values())
            if refused:
                cause += f". These copies could not be deleted: {', '.join(refused)}"
            elif mine is not None:
                manifests.forget(mine)
            if deleted:
                cause += f". The copies this run made were deleted: {', '.join(deleted)}"
    count("CopyFailed")
    return CopyFailure(error=name, cause=cause, deletedSnapshotIds=deleted)
