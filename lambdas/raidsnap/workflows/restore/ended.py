"""When a restore ends, the workflow waiting on it hears of it even if the run could not tell it
itself.

A restore tells the workflow waiting on it (the record raidsnap.aws.awaited keeps under the
run's name) that its array is mounted, or that it failed, as it gets there
(workflows/restore/report.py). A run stopped by hand or past its timeout never reaches its own
steps again, and a step that could not report, or a failure that escaped the run's failure
path, would leave the parent waiting until its own timeout. The end of every restore run
reaches this (an EventBridge rule on "Step Functions Execution Status Change"): a parent that
still waits is told now, and one that was told already refuses the token (callbacks: no one
waits any more), which changes nothing. A stop or a timeout is told as what it was
(RestoreAborted, RestoreTimedOut), whatever error the stop was given."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import JsonValue

from raidsnap.aws import awaited, callbacks
from raidsnap.execution_events import StatusChange, StatusChangeDetail
from raidsnap.models import Contract

__all__ = ["StatusChange", "Told", "tell_parent"]

ENDED = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")


class Told(Contract):
    executionArn: str
    status: str
    told: Literal["success", "failure", "none"]


def tell_parent(event: StatusChange, table: str) -> Told:
    """Tell the workflow waiting on the run (if one still does, and the run is the one it
    started) how it ended: its output, or its error and cause."""
    detail = event.detail or StatusChangeDetail()
    arn, status = detail.executionArn or "", detail.status or ""
    if not arn or status not in ENDED:
        return Told(executionArn=arn, status=status, told="none")
    restore_input = _json(detail.input)
    array = restore_input.get("array") if isinstance(restore_input, dict) else None
    parent = awaited.parent_of(table, arn, array if isinstance(array, str) else None, restore_input)
    if parent is None:
        return Told(executionArn=arn, status=status, told="none")
    if status == "SUCCEEDED":
        output = _json(detail.output)
        report = (
            {**output, "executionArn": arn} if isinstance(output, dict) else {"executionArn": arn}
        )
        told = callbacks.succeed(parent.token, report)
        return Told(executionArn=arn, status=status, told="success" if told else "none")
    error = callbacks.parent_error(status, detail.error)
    cause = callbacks.run_failure(arn, status, detail.error, detail.cause)
    told = callbacks.fail(parent.token, error, cause)
    return Told(executionArn=arn, status=status, told="failure" if told else "none")


def _json(raw: str | None) -> JsonValue:
    try:
        return json.loads(raw or "null")  # type: ignore[no-any-return]
    except json.JSONDecodeError:
        return None
