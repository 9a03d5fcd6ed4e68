"""Recovery workflow steps: look for evidence that a member is impaired, wait for the target,
start and follow the restore (keeping a lifecycle action alive, completing it once the array is
assembled), and at the end name the outcome."""

from __future__ import annotations

from typing import Any

from raidsnap import recovery
from raidsnap.environment import RecoveryStepSettings
from raidsnap.handlers._entry import entry
from raidsnap.observability import metrics


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    step = str(event["step"])
    state = event["state"]
    settings = RecoveryStepSettings.from_env()
    if step == "assess":
        return recovery.assess(state, settings.discover_document)
    if step == "target":
        return recovery.check_target(state)
    if step == "restore":
        return recovery.start_restore(state, settings.restore_state_machine_arn)
    if step == "follow":
        return recovery.follow_restore(state)
    if step == "none":
        return recovery.no_action(state, settings.lock_table)
    if step not in ("succeeded", "failed"):
        raise ValueError(f"unknown recovery step {step!r}")
    array = (state.get("input") or {}).get("array")
    if array:
        metrics.add_dimension(name="Array", value=str(array))
    name = "RecoverySucceeded" if step == "succeeded" else "RecoveryFailed"
    metrics.add_metric(name=name, unit="Count", value=1)
    return recovery.finish(state, step, settings.lock_table)
