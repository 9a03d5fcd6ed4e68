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

from botocore.exceptions import ClientError

from raidsnap.aws import THROTTLE_CODES, callbacks, error_code, snapshot_waits
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
    """The run cannot be told its snapshots are done: EBS said they are, but DescribeSnapshots
    does not show it yet (EC2's eventual consistency) or is throttled; or there is no table to
    keep the token in. The Task fails with this name, and the run looks by itself from now
    (AwaitSnapshots' Catch: WaitForSnapshots, whose steps are retried on throttling) rather
    than rest on Lambda's two retries of an asynchronous invocation."""


NOT_SEEN = SnapshotsNotSeenError.__name__


def look(event: dict[str, object]) -> dict[str, object]:
    """The check function's three callers: EBS's event (through the rule), AwaitSnapshots
    (answered by its token), and the polling path's CheckSnapshots (answered by the result)."""
    if "detail-type" in event:
        return snapshots_reported(SnapshotsCompletion.model_validate(event)).dump()
    if "taskToken" in event:
        return await_snapshots(AwaitCall.model_validate(event)).dump()
    return check_snapshots(CheckCall.model_validate(event)).dump()


def _ids(call: CheckCall) -> list[str]:
    snaps = call.snapshots
    return [*snaps.ids, *(i for p in snaps.together for i in p.ids)]


def _sets(call: CheckCall) -> list[tuple[str, str]]:
    snaps = call.snapshots
    return [(call.plan.array, snaps.setId)] + [(p.array, p.setId) for p in snaps.together]


def await_snapshots(call: AwaitCall) -> Answered:
    """The Task's invocation: write the token down, then look once."""
    table = restore_lock_table()
    check = CheckCall(plan=call.plan, snapshots=call.snapshots)
    if table is None:
        # Nowhere to keep the token: the run looks by itself.
        callbacks.fail(call.taskToken, NOT_SEEN, "no table to keep the task token in")
        return Answered(setId=call.snapshots.setId, answered="to the run's own looks")
    released = call.snapshots.holdReleased or release_hold(call.plan)
    check = check.model_copy(
        update={"snapshots": call.snapshots.model_copy(update={"holdReleased": released})}
    )
    snapshot_waits.expect(table, _sets(check), _ids(check), call.taskToken, check.dump())
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
    found = snapshot_waits.waiting_on(table, [i for i in ids if i.startswith("snap-")])
    if found is None:
        logger.info("no backup waits on these snapshots", extra={"snapshots": ids})
        return Answered(result=detail.result, answered=None)
    check = CheckCall.model_validate(found.call)
    why = (
        f"EBS reported the snapshots of set {check.snapshots.setId} {detail.result or 'done'}, "
        "but they are not all completed yet"
    )
    try:
        answered = _answer(table, found.token, check, _seconds(detail.startTime, detail.endTime))
    except ClientError as err:
        if error_code(err) not in THROTTLE_CODES:
            raise
        answered, why = None, f"DescribeSnapshots was throttled ({error_code(err)})"
    if answered is None:
        # Told, but not confirmed: the run looks by itself from now.
        snapshot_waits.done(table, _sets(check))
        callbacks.fail(found.token, NOT_SEEN, why)
        answered = "to the run's own looks"
    return Answered(setId=check.snapshots.setId, result=detail.result, answered=answered)


def _seconds(start: str | None, end: str | None) -> int | None:
    """How long EBS says the call took (the event's startTime and endTime), if it says."""
    if not start or not end:
        return None
    try:
        took = times.parse_time(end) - times.parse_time(start)
    except ValueError:
        return None
    return max(0, int(took.total_seconds()))


def _answer(table: str, token: str, check: CheckCall, took: int | None = None) -> str | None:
    """Look at every set of the call; answer the Task when they are done (a set in error fails
    it). ``took``: how long the snapshots took by EBS's event (the output's waitedSeconds).
    Returns how the Task was answered (None: not yet, the snapshots still pending)."""
    try:
        snaps: Snapshots = check_snapshots(check)
    except SnapshotFailedError as err:
        snapshot_waits.done(table, _sets(check))
        callbacks.fail(token, FAILED, str(err))
        return "failed"
    if snaps.status != "completed":
        return None
    if took is not None:
        snaps = snaps.model_copy(update={"waitedSeconds": max(snaps.waitedSeconds, took)})
    snapshot_waits.done(table, _sets(check))
    callbacks.succeed(token, snaps.dump())
    return "completed"
