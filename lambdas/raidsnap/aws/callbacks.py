"""Telling a workflow that waits on a task token how a run it started went.

A parent that starts a run with the callback pattern (``.waitForTaskToken``, Step Functions
Developer Guide, "Wait for a Callback with Task Token") puts the token of its waiting Task in
the run's input; the Task ends when someone calls SendTaskSuccess (its output is the Task's
result) or SendTaskFailure (its error and cause are the Task's) with that token. A token whose
Task no longer waits (closed already, timed out, its execution ended) is refused with
TaskTimedOut, TaskDoesNotExist or InvalidToken (Step Functions API Reference, SendTaskSuccess
and SendTaskFailure, Errors): no one is left to tell, which is not the caller's failure.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from raidsnap import clients
from raidsnap.aws import error_code
from raidsnap.observability import logger

NO_LONGER_WAITING = frozenset({"TaskTimedOut", "TaskDoesNotExist", "InvalidToken"})
# Error names a parent takes for something other than a child's failure (the recovery's
# RestoreUsable is the report of a mounted array, RestoreUnanswered its own look at a restore
# that did not answer), and those Step Functions keeps for itself (States.*): a child's end never
# passes them on.
RESERVED_ERRORS = frozenset({"RestoreUsable", "RestoreUnanswered"})
# SendTaskFailure takes an error of at most 256 characters and a cause of at most 32,768
# (API reference; botocore's model of the operation).
ERROR_LIMIT = 256
CAUSE_LIMIT = 32768


def succeed(token: str, output: dict[str, Any]) -> bool:
    """Hand ``output`` to the waiting Task; False when no Task waits on the token any more."""
    try:
        clients.stepfunctions().send_task_success(taskToken=token, output=json.dumps(output))
    except ClientError as err:
        return _gone(err)
    return True


def fail(token: str, error: str, cause: str) -> bool:
    """Fail the waiting Task with ``error`` and ``cause``; False when no Task waits any more."""
    try:
        clients.stepfunctions().send_task_failure(
            taskToken=token, error=error[:ERROR_LIMIT], cause=cause[:CAUSE_LIMIT]
        )
    except ClientError as err:
        return _gone(err)
    return True


def parent_error(status: str, error: str | None) -> str:
    """The error a parent's Task fails with for a child run that ended with ``status``: a stop
    or a timeout by what it was, whatever error the stop was given (StopExecution takes any
    error from its caller, Step Functions API Reference); a failure by the run's own error,
    except a reserved name."""
    if status == "ABORTED":
        return "RestoreAborted"
    if status == "TIMED_OUT":
        return "RestoreTimedOut"
    if error and not error.startswith("States.") and error not in RESERVED_ERRORS:
        return error
    return "RestoreFailed"


def run_failure(execution_arn: str, status: str, error: str | None, cause: str | None) -> str:
    """The cause a parent gets for a run that ended without succeeding: the run's end as
    DescribeExecution tells it (what a ``.sync`` parent gets too), its own cause shortened so
    that the whole fits SendTaskFailure."""
    text = cause or ""
    ended = {"executionArn": execution_arn, "status": status, "error": error, "cause": text}
    out = json.dumps(ended)
    while len(out) > CAUSE_LIMIT:
        # Escapes make the JSON longer than the text: cut what is over, and look again.
        text = text[: max(0, len(text) - (len(out) - CAUSE_LIMIT) - 8)]
        ended["cause"] = text + "..."
        out = json.dumps(ended)
    return out


def _gone(err: ClientError) -> bool:
    code = error_code(err)
    if code not in NO_LONGER_WAITING:
        raise err
    logger.warning("no task waits on the token any more", extra={"error": code})
    return False
