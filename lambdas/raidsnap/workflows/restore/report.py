"""Restore: tell the workflow waiting on this run (if one does) where it stands.

Who waits is never taken from the run's input: it is the record the waiting workflow wrote
under this run's execution name before starting it (raidsnap.aws.awaited), and only if this
run is the one it started (the array and the input it sent). Once the array is assembled and
mounted, the parent learns at once that it is usable and what it will find there (the output
so far; a prewarm goes on in this run); a run that fails tells its parent once its cleanup is
done, with the error and cause it ends with. What the run reached is written into the record
first, for a parent that hears nothing (an answer Step Functions refused). A run that ends
without telling (stopped, timed out, a step that could not report) is told of by its end
event (workflows/restore/ended.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import JsonValue

from raidsnap.aws import awaited, callbacks
from raidsnap.models import Contract
from raidsnap.workflows.restore.contracts import RestoreState
from raidsnap.workflows.restore.finish import output_of, steps_notes


class ReportCall(Contract):
    step: Literal["mounted", "failed"]
    # The execution input as it was sent (whatever it holds: a refused input fails the run too).
    input: JsonValue = None
    state: RestoreState


class Reported(Contract):
    """What the report did (the step's result, for the history and the logs)."""

    told: Literal["success", "failure", "none"]
    executionArn: str


def report(call: ReportCall, table: str) -> Reported:
    state = call.state
    arn = state.execution.id
    array = call.input.get("array") if isinstance(call.input, dict) else None
    parent = awaited.parent_of(table, arn, array if isinstance(array, str) else None, call.input)
    if parent is None:
        return Reported(told="none", executionArn=arn)
    if call.step == "mounted":
        prewarm: dict[str, JsonValue] | None = {"status": "running"} if _prewarms(state) else None
        output = {**output_of(state, prewarm, [], steps_notes(state)).dump(), "executionArn": arn}
        awaited.record_mounted(table, parent.restore_name, output)
        told = callbacks.succeed(parent.token, output)
        return Reported(told="success" if told else "none", executionArn=arn)
    if state.cleanup is None:
        raise ValueError("a failure is reported once the cleanup is done; the run has none")
    error, cause = state.cleanup.error, state.cleanup.cause
    name = callbacks.parent_error("FAILED", error)
    awaited.record_failed(table, parent.restore_name, state.cleanup.kept or [], name, cause)
    told = callbacks.fail(parent.token, name, callbacks.run_failure(arn, "FAILED", error, cause))
    return Reported(told="failure" if told else "none", executionArn=arn)


def _prewarms(state: RestoreState) -> bool:
    """Whether the run goes on to prewarm (restore.asl.json, IsPrewarmNeeded)."""
    v = state.volumes
    return v is not None and (
        v.initialization == "prewarm" or "prewarmVolumeIds" in v.model_fields_set
    )
