"""The event Step Functions sends EventBridge when an execution's status changes: what the
functions that follow a restore's end read of it."""

from __future__ import annotations

from raidsnap.models import Contract


class StatusChangeDetail(Contract):
    """What is read of a "Step Functions Execution Status Change" event's detail (Step
    Functions Developer Guide, "Execution status change" events: the detail gives what
    DescribeExecution gives): the ARN, the status, the start time in epoch milliseconds, the
    execution input and output as JSON strings, and the error and cause of a run that failed."""

    executionArn: str | None = None
    status: str | None = None
    startDate: int | None = None
    input: str | None = None
    output: str | None = None
    error: str | None = None
    cause: str | None = None


class StatusChange(Contract):
    """The EventBridge event; only its detail is read."""

    detail: StatusChangeDetail | None = None
