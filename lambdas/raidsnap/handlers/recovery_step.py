"""Recovery workflow steps: wait until the target can be restored onto; at the end, complete
the lifecycle action (CONTINUE or ABANDON) and shape the output or the named error."""

from __future__ import annotations

from typing import Any

from raidsnap import recovery
from raidsnap.handlers._entry import entry
from raidsnap.observability import metrics


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    step = str(event["step"])
    state = event["state"]
    if step == "target":
        return recovery.check_target(state)
    if step not in ("succeeded", "failed"):
        raise ValueError(f"unknown recovery step {step!r}")
    array = (state.get("input") or {}).get("array")
    if array:
        metrics.add_dimension(name="Array", value=str(array))
    name = "RecoverySucceeded" if step == "succeeded" else "RecoveryFailed"
    metrics.add_metric(name=name, unit="Count", value=1)
    return recovery.finish(state, step)
