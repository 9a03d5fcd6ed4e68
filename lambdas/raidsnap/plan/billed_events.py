"""What Step Functions and Lambda bill that a history shows only indirectly: a Task's retries
(each one a transition, AWS Step Functions pricing: "each retry will be charged as an additional
state transition", https://aws.amazon.com/step-functions/pricing/, checked 2026-11), and the
invocations of lambda:invoke integrations, a callback's among them (each one a request and its
duration, AWS Lambda pricing, https://aws.amazon.com/lambda/pricing/)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def retries_of(events: Iterable[Mapping[str, Any]]) -> int:
    """Task retries: each invocation scheduled again within one entry of a Task state (Step
    Functions pricing: "each retry will be charged as an additional state transition"). An
    invocation belongs to the state entry its chain of previous events leads back to."""
    by_id = {int(e["id"]): e for e in events if "id" in e}
    per_entry: dict[int, int] = {}
    for e in by_id.values():
        if e["type"] not in ("LambdaFunctionScheduled", "TaskScheduled"):
            continue
        node: Mapping[str, Any] | None = e
        while node is not None and not str(node["type"]).endswith("StateEntered"):
            node = by_id.get(int(node.get("previousEventId") or 0))
        if node is not None:
            per_entry[int(node["id"])] = per_entry.get(int(node["id"]), 0) + 1
    return sum(n - 1 for n in per_entry.values() if n > 1)


def lambda_task(event: Mapping[str, Any], key: str) -> bool:
    """A Task state's event of a lambda:invoke integration (a callback's among them)."""
    return bool((event.get(key) or {}).get("resourceType") == "lambda")


def invocation_ended(kind: str, event: Mapping[str, Any]) -> bool:
    """An invocation's end: a plain Lambda Task's result, or a lambda:invoke integration's
    (TaskSubmitted for .waitForTaskToken, whose answer arrives later and is no invocation)."""
    if kind in ("LambdaFunctionSucceeded", "LambdaFunctionFailed", "LambdaFunctionTimedOut"):
        return True
    return kind in ("TaskSubmitted", "TaskSucceeded", "TaskFailed", "TaskTimedOut") and (
        lambda_task(event, f"task{kind[4:]}EventDetails")
    )
