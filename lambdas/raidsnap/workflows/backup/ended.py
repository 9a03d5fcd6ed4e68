"""Backup: what a run cost, once it ended.

A backup's output does not carry its cost: its last step would count itself before it ends, and
with a fastRestore policy or copies the last state is a Pass after steps that wait. Instead a
rule on the run's end (every status: Step Functions sends each execution status change to
EventBridge, "Step Functions execution status change" events) brings the ended run here: its
history (GetExecutionHistory: transitions, retries included, and the functions' time) is priced
with the stack's table (raidsnap.plan.run_cost) and published as RunCostUsd for the array, which
the dashboard sums per array a month. With it, the FSR the array's fastRestore policy turned on
for the new set, from enabling to the run's end (at least its one-hour minimum), as `raidsnap
status <run>` counts it at that time; the hours the policy keeps it on after the run are its
standing cost (README, "What one run cost"), not this run's figure. Not in the history, so not
counted: the invocations outside it (EBS's event bringing the check function back, and this
one), each well under a second at 256 MB."""

from __future__ import annotations

import json

from pydantic import TypeAdapter

from raidsnap.aws import costs
from raidsnap.execution_events import StatusChange
from raidsnap.models import ArrayName
from raidsnap.workflows.backup.event_contracts import Priced

ARRAY_NAME: TypeAdapter[str] = TypeAdapter(ArrayName)


def cost_of_ended(change: StatusChange) -> Priced:
    """Price the ended run and publish its cost for its array."""
    detail = change.detail
    if detail is None or not detail.executionArn:
        return Priced(priced=False, why="the event names no execution")
    array = _array(detail.input)
    # A history that cannot be read fails the invocation: Lambda runs it twice more.
    cost = costs.so_far(detail.executionArn, after=0, array=array, kept_fsr=True)
    return Priced(
        priced=True,
        executionArn=detail.executionArn,
        array=array,
        status=detail.status,
        usd=str(cost.get("usd")),
    )


def _array(text: str | None) -> str | None:
    """The run's array, from its input (None where the input names none a run could have)."""
    try:
        return ARRAY_NAME.validate_python(json.loads(text or "{}").get("array"))
    except (ValueError, AttributeError):  # bad JSON, not an object, or no array name
        return None
