"""The recovery and the restore it starts: start it so that it can report back, keep a launch
alive meanwhile, and, when no report of a mounted array arrives, find out what became of it.

The restore is named after the recovery (``<recovery name>-restore``). Its report comes back to
RunRestore's waiting Task (lambda:invoke.waitForTaskToken: the Task ends only with
SendTaskSuccess or SendTaskFailure for its token, developer guide, "Wait for a Callback with
Task Token"), through the record raidsnap.aws.awaited keeps; the token is never in the restore's
input. Whatever reaches the Task as the report of a mounted array is checked before it is
believed (checked_report). When no report arrives (Step Functions refused the restore's
answers, the Task timed out, an answer was not the restore's), Settle looks at the restore
itself: what it wrote back into the record, then its execution (DescribeExecution), and waits
while it still runs, keeping a launch alive meanwhile: a launch is never given up while its
restore may still mount the array there.
"""

from __future__ import annotations

import os
from typing import Any

from botocore.exceptions import ClientError
from pydantic import JsonValue

from raidsnap.aws import THROTTLE_CODES, awaited, error_code, executions, lifecycle
from raidsnap.aws.notifications import notify
from raidsnap.environment import RecoveryStepSettings
from raidsnap.errors import RestoreAlreadyStartedError, UntrustedReportError
from raidsnap.observability import logger
from raidsnap.workflows.recovery import assessment
from raidsnap.workflows.recovery.contracts import KeepAlive, RecoveryState, Settled, Started
from raidsnap.workflows.recovery.events import event_time

ENDED = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"})
# Settle looks at a restore that still runs after this long, then twice as late each time, up
# to SETTLE_LONGEST_SECONDS: a restore runs 3 days at most, and each look is a few history
# events of the 25,000 an execution may have (Step Functions service quotas).
SETTLE_FIRST_SECONDS = 30
SETTLE_LONGEST_SECONDS = 600
# After a heartbeat Auto Scaling refused: the next try.
HEARTBEAT_AGAIN_SECONDS = 60


def restore_name(state: RecoveryState) -> str:
    return f"{state.execution.name}-restore"


def restore_arn(state: RecoveryState, settings: RecoveryStepSettings) -> str:
    return executions.arn_of(settings.restore_state_machine_arn, restore_name(state))


def start_restore(
    state: RecoveryState, settings: RecoveryStepSettings, token: str | None
) -> Started:
    """Tell the operators which set the restore restores and what that means for their data,
    write down that this run waits on the restore with its Task's token (raidsnap.aws.awaited),
    then start it."""
    if not token:
        raise ValueError("restore: the waiting Task's token is missing")
    array = state.input.array
    restore = state.input.restore
    name, arn = restore_name(state), restore_arn(state, settings)
    facts = assessment.latest_set(array, event_time(state.input.event.time))
    evidence = state.assessment.evidence if state.assessment else []
    notify(
        f"raidsnap: recovering {array}",
        f"Recovery of {array}: restoring onto {restore.targetInstanceId or 'its instance'} "
        f"in {restore.mode} mode (restore {arn}), because: {'; '.join(evidence)}. "
        + (facts.sentence(array) + "." if facts else f"{array} has no complete set."),
    )
    request = restore.dump()
    awaited.expect(
        settings.lock_table,
        name,
        token=token,
        parent_arn=state.execution.id,
        array=array,
        restore_input=request,
    )
    # A retried step starts nothing new: StartExecution with the name and input of a running
    # execution answers with that execution (API reference), which now answers this Task.
    if executions.start(settings.restore_state_machine_arn, name, request) is None:
        raise RestoreAlreadyStartedError(
            f"the restore {arn} exists already and has ended, or was started with another "
            "input: no restore of this recovery's runs for it to wait on; see aws "
            f"stepfunctions describe-execution --execution-arn {arn}"
        )
    return Started(executionArn=arn, started=True)


def keep_alive(state: RecoveryState, settings: RecoveryStepSettings) -> KeepAlive:
    """A heartbeat for the launch's lifecycle action while the restore runs, and the wait before
    the next: a third of the hook's heartbeat timeout, so that one late heartbeat is no loss.
    First a look at the restore: one that mounted its array or ended should have answered; if
    this run still waits, its answer was lost, and RunRestore ends to look at it (Settle)."""
    third = _heartbeat_seconds() // 3
    if _looked_unanswered(state, settings):
        return KeepAlive(status="unanswered", waitSeconds=third)
    action = state.input.lifecycle
    try:
        held = action is not None and lifecycle.heartbeat(action.as_dict())
    except ClientError as err:
        # Refused past the SDK's retries (ResourceContention: botocore's model of
        # RecordLifecycleActionHeartbeat lists it, HTTP 500): the action is still open; try
        # again well inside its heartbeat timeout.
        logger.warning("lifecycle heartbeat refused", extra={"error": error_code(err)})
        return KeepAlive(status="open", waitSeconds=HEARTBEAT_AGAIN_SECONDS)
    return KeepAlive(status="open" if held else "closed", waitSeconds=third)


def _heartbeat_seconds() -> int:
    return max(180, int(os.environ.get("LIFECYCLE_HEARTBEAT_SECONDS", "3600")))


def _looked_unanswered(state: RecoveryState, settings: RecoveryStepSettings) -> bool:
    """The look at the restore before a heartbeat. Throttled (DynamoDB or Step Functions, past
    the SDK's retries), it is left for the next heartbeat: the heartbeat goes first. Raised, the
    throttling would hold the heartbeat back for as long as the Task's Retry waits on it, past
    the hook's heartbeat timeout, and Auto Scaling would end the action with its default result
    (ABANDON, "Amazon EC2 Auto Scaling lifecycle hooks", user guide) under a restore that goes
    on mounting the array there."""
    try:
        return _unanswered(state, settings)
    except ClientError as err:
        if error_code(err) not in THROTTLE_CODES:
            raise
        logger.warning("restore look throttled; heartbeat first", extra={"error": error_code(err)})
        return False


def _unanswered(state: RecoveryState, settings: RecoveryStepSettings) -> bool:
    waiting = _own_record(state, settings)
    if waiting is None:
        return False  # not started yet (this branch runs while StartRestore starts it)
    if waiting.outcome:
        return True
    found = executions.described(restore_arn(state, settings))
    return found is not None and found.status in ENDED and _started_by(waiting, found)


def settle(state: RecoveryState, settings: RecoveryStepSettings) -> Settled:
    """What became of the restore, once RunRestore ended without the report of a mounted
    array: mounted (what it wrote back, or its output), still running (wait, and keep a launch
    alive), or ended without a mounted array."""
    arn = restore_arn(state, settings)
    # The heartbeat before the looks: a look throttled past the SDK's retries fails this step
    # into its Retry, and the launch must not run out meanwhile. A heartbeat for a restore that
    # has ended does no harm: Finish or Failure completes the action next.
    _beat(state)
    waiting = _own_record(state, settings)
    found = executions.described(arn)
    if waiting is not None and waiting.outcome == awaited.MOUNTED:
        report = _believed(waiting.report, state, arn)
        if report is not None:
            # Mounted, and the user's from then on, whatever became of the run since.
            status = found.status if found is not None else "GONE"
            return Settled(status="mounted", restoreStatus=status, report=report)
    if waiting is None or found is None or not _started_by(waiting, found):
        return Settled(status="ended", restoreStatus=found.status if found else "NOT_STARTED")
    if waiting.outcome == awaited.FAILED:
        return Settled(
            status="ended", restoreStatus="FAILED", error=waiting.error, cause=waiting.cause
        )
    if found.status == "RUNNING":
        return Settled(status="running", restoreStatus="RUNNING", waitSeconds=_next_wait(state))
    if found.status == "SUCCEEDED":
        output = found.output
        report = _believed(
            {**output, "executionArn": arn} if isinstance(output, dict) else None, state, arn
        )
        if report is not None:
            return Settled(status="mounted", restoreStatus=found.status, report=report)
    return Settled(status="ended", restoreStatus=found.status, error=found.error, cause=found.cause)


def checked_report(report: Any, state: RecoveryState, arn: str) -> dict[str, JsonValue]:
    """The restore's report of a mounted array, if it is one: of this recovery's array, from
    this recovery's own restore, with the set and the mount point a mounted array has."""
    if not isinstance(report, dict):
        raise UntrustedReportError("the report of a mounted array is not a JSON object")
    problems = []
    if report.get("array") != state.input.array:
        problems.append(f"it is of array {report.get('array')!r}, not {state.input.array!r}")
    if report.get("executionArn") != arn:
        problems.append(f"it comes from {report.get('executionArn')!r}, not this run's {arn}")
    problems += [f"it has no {key}" for key in ("setId", "mountPoint") if not report.get(key)]
    if problems:
        raise UntrustedReportError(
            "what reached this recovery as its restore's report is not believed: "
            + "; ".join(problems)
        )
    return report


def _believed(report: Any, state: RecoveryState, arn: str) -> dict[str, JsonValue] | None:
    try:
        return checked_report(report, state, arn)
    except UntrustedReportError as err:
        logger.warning("restore report not believed", extra={"reason": str(err)})
        return None


def _own_record(state: RecoveryState, settings: RecoveryStepSettings) -> awaited.Awaited | None:
    """The record this run wrote of its restore (None before it wrote one)."""
    found = awaited.awaited(settings.lock_table, restore_name(state))
    return found if found is not None and found.parent_arn == state.execution.id else None


def _started_by(waiting: awaited.Awaited, found: executions.Described) -> bool:
    """Is the execution of the restore's name the one this run started (its input)?"""
    restore_input = found.input
    array = restore_input.get("array") if isinstance(restore_input, dict) else None
    return waiting.started(array if isinstance(array, str) else None, restore_input)


def _beat(state: RecoveryState) -> None:
    """Keep a launch's lifecycle action alive while the restore runs on (a heartbeat that fails
    is tried again at the next look)."""
    action = state.input.lifecycle
    if action is None:
        return
    try:
        lifecycle.heartbeat(action.as_dict())
    except ClientError as err:
        logger.warning("lifecycle heartbeat failed", extra={"error": error_code(err)})


def _next_wait(state: RecoveryState) -> int:
    last = state.settled.waitSeconds if state.settled and state.settled.waitSeconds else 0
    longest = min(SETTLE_LONGEST_SECONDS, _heartbeat_seconds() // 3)
    return min(longest, 2 * last) if last else SETTLE_FIRST_SECONDS
