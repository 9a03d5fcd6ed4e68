"""Restore: tell the workflow waiting on this run (the input's ``callback``) where it stands.

Once the array is assembled and mounted, the parent learns at once that it is usable and what
it will find there (the output so far; a prewarm goes on in this run); a run that fails tells
its parent once its cleanup is done, with the error and cause it ends with. A run that ends
without telling (stopped, timed out, a step that could not report) is told of by its end event
(workflows/restore/ended.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import JsonValue

from raidsnap.aws import callbacks
from raidsnap.models import Contract
from raidsnap.workflows.restore.contracts import RestoreState
from raidsnap.workflows.restore.finish import output_of, steps_notes


class ReportCall(Contract):
    step: Literal["mounted", "failed"]
    taskToken: str
    state: RestoreState


class Reported(Contract):
    """What the report did (the step's result, for the history and the logs)."""

    told: Literal["success", "failure", "none"]
    executionArn: str


def report(call: ReportCall) -> Reported:
    state = call.state
    arn = state.execution.id
    if call.step == "mounted":
        prewarm: dict[str, JsonValue] | None = {"status": "running"} if _prewarms(state) else None
        output = output_of(state, prewarm, [], steps_notes(state)).dump()
        told = callbacks.succeed(call.taskToken, {**output, "executionArn": arn})
        return Reported(told="success" if told else "none", executionArn=arn)
    if state.cleanup is None:
        raise ValueError("a failure is reported once the cleanup is done; the run has none")
    error, cause = state.cleanup.error, state.cleanup.cause
    told = callbacks.fail(call.taskToken, error, callbacks.run_failure(arn, "FAILED", error, cause))
    return Reported(told="failure" if told else "none", executionArn=arn)


def _prewarms(state: RestoreState) -> bool:
    """Whether the run goes on to prewarm (restore.asl.json, IsPrewarmNeeded)."""
    v = state.volumes
    return v is not None and (
        v.initialization == "prewarm" or "prewarmVolumeIds" in v.model_fields_set
    )
