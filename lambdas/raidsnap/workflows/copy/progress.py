"""Copy, the loop: start the copies the Region's limit leaves room for, record each at once,
look at all of them; fail on the first that ends in error."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from raidsnap import tags
from raidsnap.aws import copies, manifests
from raidsnap.errors import CopyFailedError
from raidsnap.sets import CLOCK_SLACK, Manifest, SetMember
from raidsnap.workflows.copy.contracts import CopyCall, CopyPlan, CopyProgress, PlannedMember

POLL_MIN_SECONDS = 30
POLL_MAX_SECONDS = 900
# While members wait for room under the Region's limit of concurrent copies.
HELD_BACK_SECONDS = 60
# A copy run gives up (and deletes what it copied) when its copies are not complete by then; a
# first copy to a Region is a full copy of every block ("Incremental snapshot copying", EBS
# User Guide), and an array of many TiB can take most of a day.
TIME_LIMIT = timedelta(hours=36)


def run_start(plan: CopyPlan) -> datetime:
    """When this run started (Step Functions' start time of the execution)."""
    return datetime.fromisoformat(plan.startTime.replace("Z", "+00:00"))


def ours(plan: CopyPlan) -> Manifest:
    """This run's record of the copy here; a run whose record is gone or another run's stops."""
    found = manifests.get(plan.array, plan.setId)
    if found is None or found.execution_arn != plan.executionArn:
        raise CopyFailedError(
            f"the record of the copy of {plan.setId} here is gone or another run's "
            f"({found.execution_arn if found else 'none'}); this run stops"
        )
    return found


def adopt_unrecorded(plan: CopyPlan, recorded: dict[int, str], since: datetime) -> dict[int, str]:
    """Copies an earlier attempt of a step started but could not record: tagged with this run,
    copying one of this set's source snapshots, started after the run's intent was recorded."""
    found = copies.of_run(plan.executionArn)
    for member in plan.members:
        copy = found.get(member.sourceSnapshotId)
        if member.index in recorded or copy is None or copy.start_time < since - CLOCK_SLACK:
            continue
        recorded[member.index] = copy.snapshot_id
    return recorded


def _own_tags(plan: CopyPlan, member: PlannedMember) -> dict[str, str]:
    return {
        tags.ARRAY: plan.array,
        tags.SET_ID: plan.setId,
        tags.MEMBER_INDEX: str(member.index),
        tags.MEMBER_COUNT: str(len(plan.members)),
        tags.SOURCE_REGION: plan.sourceRegion,
        tags.SOURCE_ACCOUNT: plan.sourceAccount,
        tags.SOURCE_SNAPSHOT: member.sourceSnapshotId,
        tags.COPY_EXECUTION: plan.executionArn,
        "Name": f"raidsnap {plan.setId} copy",
    } | ({tags.SOURCE_START_TIME: member.sourceStartTime} if member.sourceStartTime else {})


def _start_more(plan: CopyPlan, manifest: Manifest, recorded: dict[int, str]) -> int:
    """Start copies for members without one while the Region has room; how many still wait."""
    waiting = [m for m in plan.members if m.index not in recorded]
    room = copies.MAX_CONCURRENT_COPIES - copies.in_progress()
    for member in waiting[: max(0, room)]:
        copy_id = copies.start(
            source_region=plan.sourceRegion,
            source_snapshot_id=member.sourceSnapshotId,
            description=f"raidsnap set {plan.setId} of array {plan.array}, member {member.index}",
            snapshot_tags=copies.copy_tags(member.tags, _own_tags(plan, member)),
            kms_key_id=plan.kmsKeyId,
        )
        if copy_id is None:  # another copier took the room first
            break
        recorded[member.index] = copy_id
        manifest = manifests.record_copies(manifest, recorded)
    return sum(1 for m in plan.members if m.index not in recorded)


def _failed(recorded: dict[int, str], seen: Mapping[str, SetMember]) -> list[str]:
    out = []
    for slot, copy_id in sorted(recorded.items()):
        copy = seen.get(copy_id)
        if copy is None:
            out.append(f"member {slot}: its copy {copy_id} is gone")
        elif copy.state == "error":
            why = copy.state_message or "error"
            out.append(f"member {slot}: copy {copy_id} ended in error: {why}")
    return out


def copy_step(call: CopyCall) -> CopyProgress:
    """One look: start what there is room for, then all completed, still going, or failed."""
    plan = call.plan
    before = call.progress or CopyProgress(status="pending")
    manifest = ours(plan)
    recorded = adopt_unrecorded(plan, dict(manifest.snapshots), run_start(plan))
    if recorded != dict(manifest.snapshots):
        manifest = manifests.record_copies(manifest, recorded)
    waiting = _start_more(plan, manifest, recorded)
    seen = copies.look(recorded.values())
    failed = _failed(recorded, seen)
    if failed:
        raise CopyFailedError(
            f"the copy of set {plan.setId} of {plan.array} to {plan.region} failed: "
            + "; ".join(failed)
        )
    return _progress(plan, before, recorded, seen, waiting)


def _progress(
    plan: CopyPlan,
    before: CopyProgress,
    recorded: dict[int, str],
    seen: Mapping[str, SetMember],
    waiting: int,
) -> CopyProgress:
    waited = before.waitedSeconds + before.waitSeconds
    if timedelta(seconds=waited) > TIME_LIMIT:
        raise CopyFailedError(
            f"the copy of set {plan.setId} of {plan.array} to {plan.region} is not complete "
            f"after {waited // 3600} hours"
        )
    states = [seen[c].state for c in recorded.values()]
    percents = [seen[c].progress for c in recorded.values()] + [0] * waiting
    progress = min(percents) if percents else 0
    done = waiting == 0 and all(s == "completed" for s in states)
    notes = []
    if waiting:
        notes.append(
            f"{waiting} members wait for room under the Region's limit of "
            f"{copies.MAX_CONCURRENT_COPIES} concurrent copies"
        )
    return CopyProgress(
        status="completed" if done else "pending",
        copies={str(k): v for k, v in sorted(recorded.items())},
        progress=100 if done else progress,
        waitSeconds=0 if done else _wait(waited, progress, waiting),
        waitedSeconds=waited,
        waiting=waiting,
        notes=notes,
    )


def _wait(waited: int, progress: int, waiting: int) -> int:
    """About half the time the slowest copy still seems to need, within bounds; a minute while
    members wait for room."""
    if waiting:
        return HELD_BACK_SECONDS
    elapsed = max(1.0, float(waited))
    remaining = elapsed * (100 - max(1, progress)) / max(1, progress)
    return int(min(POLL_MAX_SECONDS, max(POLL_MIN_SECONDS, remaining / 2)))
