"""Read-only questions to AWS that raidsnap's domain modules do not already answer."""

from __future__ import annotations

import heapq
import json
import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from raidsnap import clients, tags

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

# How many executions ``status --array`` looks through to find the last N of one array.
SCAN_LIMIT = 200


def arrays_with_snapshots() -> list[str]:
    """Names of the arrays that have at least one snapshot tagged ``raidsnap:array``."""
    pages = (
        clients.ec2()
        .get_paginator("describe_snapshots")
        .paginate(OwnerIds=["self"], Filters=[{"Name": "tag-key", "Values": [tags.ARRAY]}])
    )
    names = {
        tag["Value"]
        for page in pages
        for snapshot in page["Snapshots"]
        for tag in snapshot.get("Tags", [])
        if tag["Key"] == tags.ARRAY and tag["Value"]
    }
    return sorted(names)


def execution_name(workflow: str, array: str) -> str:
    """``backup-db1-20260105T030000Z-1a2b``: readable in the console, unique, within the
    80 characters and the character set Step Functions allows a state machine that logs
    (0-9, A-Z, a-z, - and _; an array name may also hold ".")."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = re.sub(r"[^A-Za-z0-9_-]", "-", array)
    suffix = f"-{stamp}-{secrets.token_hex(2)}"
    return f"{workflow}-{safe}"[: 80 - len(suffix)] + suffix


@dataclass(frozen=True)
class ExecutionInfo:
    arn: str
    name: str
    workflow: str
    state_machine: str
    status: str
    start: datetime
    stop: datetime | None
    input: Any
    output: Any
    error: str | None
    cause: str | None
    # When this was read, on the clock the run's times are on (for a run still going).
    observed: datetime | None = None

    @property
    def took(self) -> timedelta:
        return (self.stop or self.observed or datetime.now(UTC)) - self.start

    @property
    def array(self) -> str:
        return str(self.input.get("array", "")) if isinstance(self.input, dict) else ""

    @property
    def result(self) -> str:
        if self.status == "SUCCEEDED" and isinstance(self.output, dict):
            return str(self.output.get("setId", ""))
        return self.error or ""


def _loads(raw: str | None) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def describe(
    sfn: SFNClient,
    arn: str,
    workflow: str,
    *,
    timed: bool = False,
    now: Callable[[], datetime] | None = None,
) -> ExecutionInfo:
    """The execution; ``timed``: its start and end as its history stamps them (its first and,
    once it ended, its last event), which on the emulation are emulated time where
    DescribeExecution's dates are this machine's. ``now``: the clock the run is on."""
    d = sfn.describe_execution(executionArn=arn)
    start, stop = d["startDate"], d.get("stopDate")
    if timed:
        start, stop = history_times(sfn, arn, start, stop)
    return ExecutionInfo(
        arn=arn,
        name=d["name"],
        workflow=workflow,
        state_machine=d["stateMachineArn"],
        status=d["status"],
        start=start,
        stop=stop,
        input=_loads(d.get("input")),
        output=_loads(d.get("output")),
        error=d.get("error"),
        cause=d.get("cause"),
        observed=(now or (lambda: datetime.now(UTC)))(),
    )


def history_times(
    sfn: SFNClient, arn: str, start: datetime, stop: datetime | None
) -> tuple[datetime, datetime | None]:
    """(first event's timestamp, last event's when the run has ended): two calls of one event.
    A history that cannot be read now (refused, throttled) leaves DescribeExecution's dates:
    how the run ended is shown all the same."""
    try:
        first = sfn.get_execution_history(executionArn=arn, maxResults=1)["events"]
        last = (
            sfn.get_execution_history(executionArn=arn, maxResults=1, reverseOrder=True)["events"]
            if stop is not None
            else []
        )
    except (ClientError, BotoCoreError):
        return start, stop
    return (
        first[0]["timestamp"] if first else start,
        last[0]["timestamp"] if last else stop,
    )


def _executions(sfn: SFNClient, workflow: str, arn: str) -> Iterator[tuple[datetime, str, str]]:
    for page in sfn.get_paginator("list_executions").paginate(stateMachineArn=arn):
        for e in page["executions"]:
            yield e["startDate"], workflow, e["executionArn"]


def recent(
    sfn: SFNClient,
    machines: dict[str, str],
    last: int,
    array: str | None = None,
    *,
    timed: bool = False,
    now: Callable[[], datetime] | None = None,
) -> list[ExecutionInfo]:
    """The newest ``last`` executions of every workflow, newest first (of ``array`` only, when
    given: that needs each execution's input, so at most SCAN_LIMIT are looked at). ``timed``:
    each run's times from its history (describe)."""
    streams = [_executions(sfn, w, arn) for w, arn in sorted(machines.items())]
    merged = heapq.merge(*streams, key=lambda item: item[0], reverse=True)
    found: list[ExecutionInfo] = []
    for scanned, (_, workflow, arn) in enumerate(merged):
        if len(found) >= last or scanned >= SCAN_LIMIT:
            break
        info = describe(sfn, arn, workflow, now=now)
        if array is None or info.array == array:
            found.append(describe(sfn, arn, workflow, timed=True, now=now) if timed else info)
    return found


class ExecutionNotFoundError(Exception):
    pass


def find(sfn: SFNClient, machines: dict[str, str], ref: str) -> ExecutionInfo:
    """An execution by ARN, or by name within one of the workflows."""
    workflow_of = {arn: w for w, arn in machines.items()}
    if ref.startswith("arn:"):
        try:
            info = describe(sfn, ref, "?")
        except ClientError as err:
            raise ExecutionNotFoundError(f"no execution {ref}: {_message(err)}") from None
        return _with_workflow(info, workflow_of.get(info.state_machine, "?"))
    for workflow, machine in sorted(machines.items()):
        candidate = machine.replace(":stateMachine:", ":execution:", 1) + ":" + ref
        try:
            return describe(sfn, candidate, workflow)
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") not in (
                "ExecutionDoesNotExist",
                "ResourceNotFound",
            ):
                raise
    names = " or ".join(sorted(machines))
    raise ExecutionNotFoundError(f"no execution named {ref!r} in the {names} workflow")


def _with_workflow(info: ExecutionInfo, workflow: str) -> ExecutionInfo:
    return ExecutionInfo(**{**info.__dict__, "workflow": workflow})


def _message(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Message", err))
