"""Step Functions executions: what a run's history says it did."""

from __future__ import annotations

from raidsnap import clients


def entered(execution_arn: str, state_name: str) -> bool:
    """Whether the run entered the state ``state_name`` (its full history, newest first)."""
    pages = (
        clients.stepfunctions()
        .get_paginator("get_execution_history")
        .paginate(executionArn=execution_arn, reverseOrder=True)
    )
    for page in pages:
        for event in page["events"]:
            entered = event.get("stateEnteredEventDetails")
            if entered and entered.get("name") == state_name:
                return True
    return False
