"""Step Functions executions raidsnap starts, stops and follows, and what a run's history says
it did."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from raidsnap import clients
from raidsnap.aws import error_code


@dataclass(frozen=True)
class Started:
    arn: str
    # When the execution started. StartExecution with the name and input of a running
    # execution succeeds and answers with that execution, started before the call
    # (StartExecution, Step Functions API Reference).
    start_date: datetime


@dataclass(frozen=True)
class Described:
    """What DescribeExecution says of a run: its input and output parsed (None: none, or not
    JSON)."""

    status: str
    input: Any
    output: Any
    error: str | None
    cause: str | None


def described(arn: str) -> Described | None:
    """The run as DescribeExecution gives it; None when Step Functions knows no such run."""
    try:
        found = clients.stepfunctions().describe_execution(executionArn=arn)
    except ClientError as err:
        if error_code(err) in ("ExecutionDoesNotExist", "InvalidArn"):
            return None
        raise
    return Described(
        status=str(found["status"]),
        input=_parsed(found.get("input")),
        output=_parsed(found.get("output")),
        error=found.get("error"),
        cause=found.get("cause"),
    )


def _parsed(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except json.JSONDecodeError:
        return None


def arn_of(machine_arn: str, name: str) -> str:
    """The ARN an execution ``name`` of the state machine has (or would have)."""
    return machine_arn.replace(":stateMachine:", ":execution:", 1) + ":" + name


def start(machine_arn: str, name: str, payload: dict[str, Any]) -> Started | None:
    """Start ``name``; None when an execution of that name already exists with another input
    or has ended (ExecutionAlreadyExists)."""
    try:
        answer = clients.stepfunctions().start_execution(
            stateMachineArn=machine_arn, name=name, input=json.dumps(payload, sort_keys=True)
        )
    except ClientError as err:
        if error_code(err) != "ExecutionAlreadyExists":
            raise
        return None
    started = answer["startDate"]
    if started.tzinfo is None:
        started = started.replace(tzinfo=UTC)
    return Started(answer["executionArn"], started)


def stop(arn: str, error: str, cause: str) -> None:
    clients.stepfunctions().stop_execution(executionArn=arn, error=error, cause=cause)


def history(execution_arn: str, newest_first: bool = False) -> Iterator[dict[str, Any]]:
    """The run's history events, page by page (GetExecutionHistory)."""
    pages = (
        clients.stepfunctions()
        .get_paginator("get_execution_history")
        .paginate(executionArn=execution_arn, reverseOrder=newest_first)
    )
    for page in pages:
        for event in page["events"]:
            yield dict(event)


def entered(execution_arn: str, state_name: str) -> bool:
    """Whether the run entered the state ``state_name`` (its full history, newest first)."""
    for event in history(execution_arn, newest_first=True):
        entered = event.get("stateEnteredEventDetails")
        if entered and entered.get("name") == state_name:
            return True
    return False


def running(state_machine_arn: str) -> list[str]:
    """The ARNs of the state machine's RUNNING executions, every page (Step Functions API
    Reference, ListExecutions: statusFilter RUNNING; a nextToken while more remain)."""
    pages = clients.stepfunctions().get_paginator("list_executions")
    found = pages.paginate(stateMachineArn=state_machine_arn, statusFilter="RUNNING")
    return [e["executionArn"] for page in found for e in page["executions"]]
