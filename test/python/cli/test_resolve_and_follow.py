"""Finding the stack's state machines, and following a run's history a page at a time."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from rich.console import Console

from raidsnap_cli.follow import follow
from raidsnap_cli.resolve import ResolveError, resolve

ROLE = "arn:aws:iam::123456789012:role/raidsnap-test"


@pytest.fixture
def sfn() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("stepfunctions")


def machine(sfn: Any, name: str, comment: str, stack: str | None = None) -> str:
    definition = {
        "Comment": comment,
        "StartAt": "Done",
        "States": {"Done": {"Type": "Succeed"}},
    }
    tags = [{"key": "aws:cloudformation:stack-name", "value": stack}] if stack else []
    return str(
        sfn.create_state_machine(
            name=name, definition=json.dumps(definition), roleArn=ROLE, tags=tags
        )["stateMachineArn"]
    )


class FakeCloudFormation:
    """ListStackResources as CloudFormation pages it; an unknown stack is a ValidationError."""

    def __init__(self, stacks: dict[str, list[tuple[str, str]]]) -> None:
        self.stacks = stacks

    def get_paginator(self, operation: str) -> FakeCloudFormation:
        assert operation == "list_stack_resources"
        return self

    def paginate(self, StackName: str) -> Iterator[dict[str, Any]]:
        if StackName not in self.stacks:
            raise ClientError(
                {
                    "Error": {
                        "Code": "ValidationError",
                        "Message": f"Stack {StackName} not found",
                    }
                },
                "ListStackResources",
            )
        resources = self.stacks[StackName]
        for start in range(0, len(resources), 2):  # small pages: paging must be followed
            yield {
                "StackResourceSummaries": [
                    {"ResourceType": kind, "PhysicalResourceId": physical}
                    for kind, physical in resources[start : start + 2]
                ]
            }


SM = "AWS::StepFunctions::StateMachine"


def test_the_stack_resources_decide_even_when_another_stack_has_the_same_workflows(
    sfn: Any,
) -> None:
    # GIVEN two deployments in one account, and a state machine of ours that is not a workflow
    backup = machine(sfn, "BackupWorkflowStateMachine80046694-AbCd", "raidsnap backup: x")
    restore = machine(sfn, "RestoreWorkflowStateMachine494B12BE-EfGh", "raidsnap restore: y")
    machine(sfn, "BackupWorkflowStateMachine80046694-Other", "raidsnap backup: x")
    reporter = machine(sfn, "SetAgeReporter-IjKl", "reports set ages")
    cloudformation = FakeCloudFormation(
        {
            "raidsnap": [
                ("AWS::IAM::Role", "raidsnap-role"),
                (SM, reporter),
                (SM, backup),
                ("AWS::Lambda::Function", "raidsnap-prepare"),
                (SM, restore),
            ]
        }
    )

    # WHEN the workflows are resolved for stack raidsnap
    found, how = resolve(cloudformation, sfn, "raidsnap")

    # THEN the stack's own state machines are picked, recognised by their Comment
    assert found == {"backup": backup, "restore": restore}
    assert how == "stack raidsnap"


def test_without_the_stack_the_comment_scan_leaves_out_other_stacks_machines(
    sfn: Any,
) -> None:
    ours = machine(sfn, "BackupA", "raidsnap backup: x", stack="raidsnap")
    machine(sfn, "BackupB", "raidsnap backup: x", stack="raidsnap-staging")
    restore = machine(sfn, "RestoreA", "raidsnap restore: y")  # untagged: may be ours
    machine(sfn, "Unrelated", "raidsnap is mentioned, but not as 'raidsnap <workflow>:'")

    found, how = resolve(FakeCloudFormation({}), sfn, "raidsnap")

    assert found == {"backup": ours, "restore": restore}
    assert how == "state machine Comments"


def test_two_candidates_for_one_workflow_are_refused_naming_both(sfn: Any) -> None:
    first = machine(sfn, "BackupA", "raidsnap backup: x")
    second = machine(sfn, "BackupB", "raidsnap backup: x")

    with pytest.raises(ResolveError) as refused:
        resolve(FakeCloudFormation({}), sfn, "raidsnap")

    assert first in str(refused.value)
    assert second in str(refused.value)


def test_no_workflow_anywhere_says_what_to_check(sfn: Any) -> None:
    machine(sfn, "Other", "someone else's workflow")
    with pytest.raises(ResolveError, match=r"check --stack, --region and --profile"):
        resolve(FakeCloudFormation({"raidsnap": []}), sfn, "raidsnap")


# ---------------------------------------------------------------------- following


T0 = datetime(2026, 1, 5, 3, 0, tzinfo=UTC)


def entered(event_id: int, name: str) -> dict[str, Any]:
    return {
        "id": event_id,
        "type": "TaskStateEntered",
        "timestamp": T0 + timedelta(seconds=event_id),
        "stateEnteredEventDetails": {"name": name},
    }


class GrowingHistory:
    """One execution whose history grows at every DescribeExecution, paged as the service
    pages it: newest first with reverseOrder, maxResults a page, a nextToken to the next."""

    def __init__(self, batches: list[int], final: str) -> None:
        self.batches = batches
        self.final = final
        self.events: list[dict[str, Any]] = []
        self.history_calls: list[dict[str, Any]] = []

    def describe_execution(self, executionArn: str) -> dict[str, Any]:
        del executionArn
        if self.batches:
            for _ in range(self.batches.pop(0)):
                n = len(self.events) + 1
                self.events.append(entered(n, f"Step{n}"))
        status = "RUNNING" if self.batches else self.final
        return {"name": "restore-db1", "startDate": T0, "status": status}

    def get_execution_history(self, **kwargs: Any) -> dict[str, Any]:
        self.history_calls.append(kwargs)
        ordered = self.events[::-1] if kwargs.get("reverseOrder") else self.events
        start = int(kwargs.get("nextToken") or 0)
        end = start + int(kwargs["maxResults"])
        page: dict[str, Any] = {"events": ordered[start:end]}
        if end < len(ordered):
            page["nextToken"] = str(end)
        return page


def test_follow_reads_each_event_once_and_pages_only_through_what_is_new() -> None:
    # GIVEN a run that has 250 events at the first look, then 3, then 1 more, then times out
    history = GrowingHistory([0, 250, 3, 1], final="TIMED_OUT")
    out = io.StringIO()

    console = Console(file=out, width=120)

    followed = follow(history, "arn", console, 0.0)  # type: ignore[arg-type]

    # THEN every step was seen once, in order, and the run's end is reported as it was
    assert [name for _, name in followed.narrator.states] == [f"Step{n}" for n in range(1, 255)]
    assert followed.status == "TIMED_OUT"
    # (states of a workflow it does not know are told by their names, once each)
    assert len(re.findall(r"\+\d+m? ?\d*s?\s+Step\d+\n", out.getvalue())) == 254
    # AND the 250 took three pages of 100; each later poll needed one page, newest first
    tokens = [call.get("nextToken") for call in history.history_calls]
    assert tokens == [None, "100", "200", None, None]
    assert all(call["reverseOrder"] for call in history.history_calls)


def test_on_a_terminal_follow_shows_a_live_view_of_the_run() -> None:
    history = GrowingHistory([2, 1], final="SUCCEEDED")
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)

    followed = follow(history, "arn", console, 0.0)  # type: ignore[arg-type]

    assert followed.status == "SUCCEEDED"
    screen = out.getvalue()
    for label in ("run", "status", "now", "so far"):
        assert label in screen
    assert "Step3" in screen
    assert "SUCCEEDED" in screen
    for internal in ("states done", "last event", "StateEntered"):
        assert internal not in screen
