"""Drill, last step: the DrillSucceeded or DrillFailed metric and a notification."""

from __future__ import annotations

from botocore.exceptions import ClientError
from pydantic import JsonValue

from raidsnap import tags
from raidsnap.aws import costs, notifications
from raidsnap.errors import DrillTeardownFailedError
from raidsnap.models import StepError
from raidsnap.observability import count, for_array, logger
from raidsnap.plan.causes import child_failure
from raidsnap.workflows.drill.contracts import DrillOutput, DrillReport, DrillRun


def report(state: DrillRun, topic: str) -> DrillReport:
    """Decide the outcome, tell the operator, and shape the output or the named error."""
    array, target = _named(state)
    left, deleted = list(state.teardown.left), list(state.teardown.deleted)
    removal = _removal_failure(state)
    passed = state.error is None and removal is None
    error = cause = ""
    if state.error is not None:
        error, cause = child_failure(state.error.model_dump())
    if removal is not None:
        if not error:
            error, cause = public_name_of(DrillTeardownFailedError), removal
        else:
            cause += f" [{removal}]"
    restored = state.restore.output
    warnings = list(state.verification.warnings) if state.verification else []
    if passed:
        message = _passed_message(state, array, target) + "".join(
            f" WARNING: {w}." for w in warnings
        )
        subject = f"raidsnap drill of {array}: passed" + (" with a warning" if warnings else "")
    else:
        subject = f"raidsnap drill of {array}: FAILED ({error})"
        message = (
            f"The restore drill of {array} onto {target} failed with {error}: {cause}. "
            f"Teardown deleted {len(deleted)} volumes the drill created"
            + (f" and left {left}" if left else "")
            + (", nothing is left behind" if removal is None else "")
            + f". The array itself was not touched. Run: {state.execution.id}"
        )
    cost = _cost(state, array, passed)
    if cost is not None:
        message += f" It cost {cost['text']}."
    notifications.publish(topic, subject, message)
    logger.info("drill reported", extra={"array": array, "passed": passed})
    for_array(array)
    count("DrillSucceeded" if passed else "DrillFailed")
    if not passed:
        return DrillReport(passed=False, array=array, message=message, error=error, cause=cause)
    output = DrillOutput(
        array=array,
        setId=restored.setId if restored else None,
        targetInstanceId=target,
        restoreExecutionArn=state.restore.executionArn,
        verification=state.verification,
        deletedVolumeIds=deleted,
        message=message,
        cost=cost,
    )
    return DrillReport(passed=True, array=array, message=message, output=output)


def _cost(state: DrillRun, array: str, passed: bool) -> dict[str, JsonValue] | None:
    """The drill's cost: its own run so far and the states after Report (DidDrillPass, then
    Passed and Done, or Failed), its restore's as the restore reported it, and the restore's
    volumes until the teardown deleted them. A history that cannot be read leaves it out: the
    drill has ended, and raidsnap status computes it."""
    restored = state.restore.output
    child = (restored.cost or {}).get("usage") if restored else None
    if not state.execution.id:
        return None
    try:
        return costs.so_far(
            state.execution.id,
            after=3 if passed else 2,
            children=[child] if isinstance(child, dict) else [],
            array=array,
        )
    except ClientError:
        return None


def _removal_failure(state: DrillRun) -> str | None:
    """Why teardown may have left volumes of the drill's restore behind, if it may have: some
    were still there when its looks ran out, or RemoveVolumes failed before it finished one
    pass (nothing then says what it removed)."""
    arn = state.plan.restoreExecutionArn if state.plan else None
    left = list(state.teardown.left)
    if left:
        return (
            f"teardown could not remove volumes {left} (tagged {tags.RESTORE_EXECUTION}="
            f"{arn}): delete them by hand"
        )
    if state.plan is None or state.teardown.status is not None:
        return None  # nothing to remove (Prepare failed), or RemoveVolumes finished
    failure = state.teardownError or StepError(Cause="RemoveVolumes did not run")
    name, why = child_failure(failure.model_dump())
    return (
        f"teardown failed ({name}: {why}) before it removed the volumes tagged "
        f"{tags.RESTORE_EXECUTION}={arn}: delete them by hand"
    )


def _named(state: DrillRun) -> tuple[str, JsonValue]:
    """The array and the drill instance: as Prepare validated them, else as the input gave
    them (a run whose input Prepare refused still reports, naming what it was asked)."""
    given = state.input if isinstance(state.input, dict) else {}
    if state.plan is not None:
        return state.plan.array, state.plan.targetInstanceId
    return str(given.get("array") or "unknown"), given.get("targetInstanceId")


def _passed_message(state: DrillRun, array: str, target: JsonValue) -> str:
    restored = state.restore.output
    verification = state.verification
    volume_ids = restored.volumeIds if restored else []
    deleted = state.teardown.deleted
    return (
        f"The restore drill of {array} passed. Set {restored.setId if restored else None} was "
        f"restored read-only onto {target} as {restored.mdDevice if restored else None} at "
        f"{restored.mountPoint if restored else None} from {len(volume_ids)} volumes; "
        f"md UUID {verification.mdUuid if verification else None} and filesystem "
        f"{(verification.filesystem if verification else None) or 'unrecorded'} match the set. "
        f"Teardown deleted the {len(deleted)} volumes the drill created. The array itself was "
        "not touched."
    )


def public_name_of(error: type[Exception]) -> str:
    return error.__name__.removesuffix("Error")
