"""When a restore ends, its parent hears of it even if the run could not tell it itself.

A restore told its parent (the input's ``callback``) that its array is mounted, or that it
failed, as it got there (workflows/restore/report.py). A run stopped by hand or past its
timeout never reaches its own steps again, and a step that could not report, or a failure that
escaped the run's failure path, would leave the parent waiting until its own timeout. The end
of every restore run reaches this (an EventBridge rule on "Step Functions Execution Status
Change"): a parent that still waits is told now, and one that was told already refuses the
token (callbacks: no one waits any more), which changes nothing."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import JsonValue

from raidsnap.aws import callbacks
from raidsnap.models import Contract, StatusChange, StatusChangeDetail
from raidsnap.observability import logger

ENDED = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")


class Told(Contract):
    executionArn: str
    status: str
    told: Literal["success", "failure", "none"]


def tell_parent(event: StatusChange) -> Told:
    """Tell the workflow waiting on the run (if one still does) how it ended: its output, or
    its error and cause (a stopped or timed-out run as RestoreAborted or RestoreTimedOut)."""
    detail = event.detail or StatusChangeDetail()
    arn, status = detail.executionArn or "", detail.status or ""
    token = _token(detail.input)
    if not arn or not token or status not in ENDED:
        return Told(executionArn=arn, status=status, told="none")
    if status == "SUCCEEDED":
        output = _json(detail.output)
        told = callbacks.succeed(token, {**output, "executionArn": arn})
        return Told(executionArn=arn, status=status, told="success" if told else "none")
    error = _error_name(status, detail.error)
    cause = callbacks.run_failure(arn, status, detail.error, detail.cause)
    told = callbacks.fail(token, error, cause)
    return Told(executionArn=arn, status=status, told="failure" if told else "none")


def _error_name(status: str, error: str | None) -> str:
    """The error the parent's Task fails with: the run's own, except a name Step Functions
    keeps for itself (States.*), and a stop or a timeout by what it was."""
    if error and not error.startswith("States."):
        return error
    if status == "ABORTED":
        return "RestoreAborted"
    if status == "TIMED_OUT":
        return "RestoreTimedOut"
    return "RestoreFailed"


def _token(raw: str | None) -> str | None:
    callback = _json(raw).get("callback")
    token = callback.get("taskToken") if isinstance(callback, dict) else None
    if raw is None:
        logger.warning("the end event carries no input: no parent can be told")
    return token if isinstance(token, str) and token else None


def _json(raw: str | None) -> dict[str, JsonValue]:
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
