"""Backup: wait for the set's snapshots on EBS's word instead of looking every few minutes.

AwaitSnapshots invokes the check function with its task token. The function lets restores run
again (the snapshots are taken), writes the token down under every set of the call
(raidsnap.aws.snapshot_waits), then looks once: snapshots already complete (or one in error)
answer the Task at once. Otherwise EBS's "EBS Multi-Volume Snapshots Completion Status" event
brings the same function back when the call's snapshots are done; it runs the very check the
polling path runs (check_snapshots: DescribeSnapshots of every set), so the Task hears nothing
the snapshots do not say. Should no event come (EventBridge delivers events from AWS services
on a best-effort basis), the Task's TimeoutSeconds sends the run back to looking by itself
(WaitForSnapshots). Each look of that path is three billed transitions; this one is one."""

from __future__ import annotations

from raidsnap import tags
from raidsnap.aws import callbacks, snapshot_sets, snapshot_waits
from raidsnap.environment import restore_lock_table
from raidsnap.errors import RaidsnapError, SnapshotFailedError
from raidsnap.observability import logger
from raidsnap.workflows.backup import times
from raidsnap.workflows.backup.contracts import AwaitCall, CheckCall, Snapshots
from raidsnap.workflows.backup.event_contracts import Answered, SnapshotsCompletion
from raidsnap.workflows.backup.prepare import release_hold
from raidsnap.workflows.backup.snapshot import check_snapshots

EVENT_DETAIL_TYPE = "EBS Multi-Volume Snapshots Completion Status"
# The error a failed set fails the Task with: the class name the polling path's Lambda error
# carries, so that ExplainFailure reads one name either way.
FAILED = SnapshotFailedError.__name__


class SnapshotsNotSeenError(RaidsnapError):
    """EBS said the call's snapshots are done, but DescribeSnapshots does not show it yet (EC2's
    eventual consistency): raised so that Lambda runs the event again (an asynchronous
    invocation that fails is retried twice, a minute and then two later)."""


def look(event: dict[str, object]) -> dict[str, object]:
    """The check function's three callers: EBS's event (through the rule), AwaitSnapshots
    (answered by its token), and the polling path's CheckSnapshots (answered by the result)."""
    if "detail-type" in event:
        return snapshots_reported(SnapshotsCompletion.model_validate(event)).dump()
    if "taskToken" in event:
        return await_snapshots(AwaitCall.model_validate(event)).dump()
    return check_snapshots(CheckCall.model_validate(event)).dump()


def _sets(call: CheckCall) -> list[tuple[str, str]]:
    snaps = call.snapshots
    return [(call.plan.array, snaps.setId)] + [(p.array, p.setId) for p in snaps.together]


def await_snapshots(call: AwaitCall) -> Answered:
    """The Task's invocation: write the token down, then look once."""
    table = restore_lock_table()
    check = CheckCall(plan=call.plan, snapshots=call.snapshots)
    if table is None:
        # Nowhere to keep the token: answer at once, and let the run look by itself.
        callbacks.succeed(call.taskToken, check_snapshots(check).dump())
        return Answered(setId=call.snapshots.setId, answered="at once, with no table")
    released = call.snapshots.holdReleased or release_hold(call.plan)
    check = check.model_copy(
        update={"snapshots": call.snapshots.model_copy(update={"holdReleased": released})}
    )
    snapshot_waits.expect(table, _sets(check), call.taskToken, check.dump())
    return Answered(setId=check.snapshots.setId, answered=_answer(table, call.taskToken, check))


def snapshots_reported(event: SnapshotsCompletion) -> Answered:
    """EBS's event for a CreateSnapshots call: answer the run waiting on its sets, if any."""
    detail = event.detail
    if event.detail_type != EVENT_DETAIL_TYPE or detail.event != "createSnapshots":
        logger.warning("not createSnapshots", extra={"detailType": event.detail_type})
        return Answered(answered=None)
    table = restore_lock_table()
    if table is None:
        return Answered(answered=None)
    # snapshot_id is the snapshot's ARN; its id follows "snapshot/" (the guide's examples).
    ids = sorted({s.snapshot_id.rsplit("/", 1)[-1] for s in detail.snapshots})
    for array, set_id in _tagged_sets([i for i in ids if i.startswith("snap-")]):
        found = snapshot_waits.waiting(table, array, set_id)
        if found is not None:
            check = CheckCall.model_validate(found.call)
            took = _seconds(detail.startTime, detail.endTime)
            answered = _answer(table, found.token, check, detail.result, took)
            return Answered(setId=set_id, result=detail.result, answered=answered)
    logger.info("no backup waits on these snapshots", extra={"snapshots": ids})
    return Answered(result=detail.result, answered=None)


def _tagged_sets(ids: list[str]) -> list[tuple[str, str]]:
    """The raidsnap sets (array, set id) the account's own snapshots of the event belong to (a
    snapshot deleted since is left out)."""
    found: set[tuple[str, str]] = set()
    for snap in snapshot_sets.by_ids(ids) if ids else []:
        by_key = {t["Key"]: t["Value"] for t in snap.get("Tags", [])}
        if by_key.get(tags.ARRAY) and by_key.get(tags.SET_ID):
            found.add((by_key[tags.ARRAY], by_key[tags.SET_ID]))
    return sorted(found)


def _seconds(start: str | None, end: str | None) -> int | None:
    """How long EBS says the call took (the event's startTime and endTime), if it says."""
    if not start or not end:
        return None
    try:
        took = times.parse_time(end) - times.parse_time(start)
    except ValueError:
        return None
    return max(0, int(took.total_seconds()))


def _answer(
    table: str, token: str, check: CheckCall, said: str | None = None, took: int | None = None
) -> str | None:
    """Look at every set of the call; answer the Task when they are done. ``said``: what EBS's
    event said (None: the Task's own first look, which may find them still pending); ``took``:
    how long the snapshots took by the event (the output's waitedSeconds). Returns how the
    Task was answered (None: not yet)."""
    try:
        snaps: Snapshots = check_snapshots(check)
    except SnapshotFailedError as err:
        snapshot_waits.done(table, _sets(check))
        callbacks.fail(token, FAILED, str(err))
        return "failed"
    if snaps.status != "completed":
        if said is not None:
            raise SnapshotsNotSeenError(
                f"EBS reported the snapshots of set {check.snapshots.setId} {said or 'done'}, "
                "but they are not all completed yet"
            )
        return None
    if took is not None:
        snaps = snaps.model_copy(update={"waitedSeconds": max(snaps.waitedSeconds, took)})
    snapshot_waits.done(table, _sets(check))
    callbacks.succeed(token, snaps.dump())
    return "completed"
