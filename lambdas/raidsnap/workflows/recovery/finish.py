"""The end of a recovery: the lifecycle action completed, the claim given back, the array's tag
and alarm where the array is, and an output (or named error) that says which set was restored
and what its age means for the user's data."""

from __future__ import annotations

import json

from botocore.exceptions import ClientError
from pydantic import JsonValue

from raidsnap import tags
from raidsnap.aws import awaited, callbacks, claims, error_code, lifecycle
from raidsnap.aws.instances import instance_facts, tag_array
from raidsnap.aws.notifications import notify
from raidsnap.environment import RecoveryStepSettings
from raidsnap.errors import LaunchAbandonedError, ThrottledError, UntrustedReportError
from raidsnap.observability import logger
from raidsnap.plan.causes import child_failure
from raidsnap.plan.set_facts import SetFacts, age_text
from raidsnap.workflows.recovery import assessment, following
from raidsnap.workflows.recovery.contracts import (
    Failure,
    Finished,
    RecoveryState,
    Report,
    SetRef,
)
from raidsnap.workflows.recovery.events import event_time
from raidsnap.workflows.recovery.protection import follow


def finish(
    state: RecoveryState, outcome: str, settings: RecoveryStepSettings
) -> Finished | Failure:
    """Complete the lifecycle action (if any, and not completed yet) with CONTINUE or ABANDON,
    give the array's recovery claim back, and shape the run's output, or its named error and
    cause. Both name the set restored, its age, and that writes after it are not in it. A
    report of a mounted array is believed only once checked (following.checked_report), and a
    launch is put into service before anyone is told the array is recovered: one whose action
    ran out is no recovery (LaunchAbandoned). The run's record of its restore goes last."""
    array = state.input.array
    table = settings.lock_table
    arn = following.restore_arn(state, settings)
    facts = assessment.latest_set(array, event_time(state.input.event.time))
    done: Finished | Failure
    if outcome == "succeeded":
        restored = _mounted(state, arn)
        _continue_launch(state, restored)
        done = _succeeded(state, facts, restored)
        if state.input.lifecycle is not None:
            update = {"lifecycleAction": "CONTINUE"}
            done = Finished(output=done.output.model_copy(update=update))
        claims.unclaim(table, array, state.execution.name)
    else:
        out, result = _failed(state, facts, _mount_evidence(state, settings, arn))
        claims.unclaim(table, array, state.execution.name)
        done = _complete_lifecycle(state, out, result)
    awaited.forget(table, following.restore_name(state))
    return done


def _continue_launch(state: RecoveryState, restored: dict[str, JsonValue]) -> None:
    """Put a launch that holds the mounted array into service (CONTINUE). Each attempt records a
    heartbeat first, so that the step's retries (a throttled completion) keep the action open.
    An action no longer open was ended by someone: Auto Scaling's own view of the instance
    (launch_outcome) says whether this step's earlier attempt, or a lost answer the SDK
    retried, put it into service, or its timeout ended it with the hook's default result,
    ABANDON, and Auto Scaling terminates the instance ("Complete a lifecycle action", Amazon
    EC2 Auto Scaling user guide)."""
    action = state.input.lifecycle
    if action is None:
        return
    lifecycle.heartbeat(action.as_dict())
    if lifecycle.complete(action.as_dict(), "CONTINUE"):
        return
    ended = lifecycle.launch_outcome(action.as_dict())
    if ended == "CONTINUE":
        logger.warning("lifecycle action already completed: in service", extra=action.as_dict())
        return
    if ended is None:
        raise ThrottledError(
            f"Auto Scaling has no open lifecycle action {action.lifecycleActionToken} but still "
            f"shows {action.instanceId} waiting: looked at again shortly"
        )
    restore = restored.get("executionArn")
    raise LaunchAbandonedError(
        f"the restore {restore} mounted {state.input.array} on {action.instanceId} at "
        f"{restored.get('mountPoint')}, but the launch's lifecycle action (hook "
        f"{action.lifecycleHookName} of group {action.autoScalingGroupName}) was no longer open "
        "when the recovery went to complete it with CONTINUE, and Auto Scaling shows the "
        "instance terminating or gone: the hook's timeout ended the action with its default "
        f"result, ABANDON. The volumes the restore created are tagged "
        f"{tags.RESTORE_EXECUTION}={restore}"
    )


def _succeeded(
    state: RecoveryState, facts: SetFacts | None, restored: dict[str, JsonValue]
) -> Finished:
    given = state.input
    array = given.array
    restore_arn = str(restored.get("executionArn") or "")
    taken = restored.get("setTakenAt")
    same_set = facts is not None and facts.set_id == restored.get("setId")
    target = str(restored.get("targetInstanceId") or given.restore.targetInstanceId)
    prewarm = restored.get("prewarm")
    # Settle found the report written back by a restore that has ended since, without
    # reaching its own end (stopped, timed out, failed after the mount): no prewarm goes on.
    gone = state.settled.restoreStatus if state.settled else None
    cut_short = gone in ("ABORTED", "TIMED_OUT", "FAILED")
    running = isinstance(prewarm, dict) and prewarm.get("status") == "running" and not cut_short
    message = (
        f"{array} was restored from set {restored.get('setId')}, taken {taken}"
        + (
            f" ({age_text(facts.age_minutes)} before the {given.trigger})"
            if facts and same_set
            else ""
        )
        + f"; writes made after that time to {array} are not in it. It is mounted and usable "
        + f"on {target} at {restored.get('mountPoint')}"
        + (
            f"; the prewarm goes on in restore {restore_arn} (until it ends, blocks it has not "
            "read yet come from S3 slowly on first access)"
            if running
            else ""
        )
        + (
            f"; restore {restore_arn} then ended {gone} without finishing its last steps (a "
            "prewarm it had begun did not finish: blocks not read yet come from S3 slowly on "
            "first access)"
            if cut_short
            else ""
        )
    )
    guard = follow(array, target)
    message += ". Protection: " + guard.sentence()
    unsent = _notify_recovered(f"raidsnap: {array} recovered onto {target}", message)
    told = (
        facts.as_dict()
        if facts and same_set
        else {"setId": restored.get("setId"), "takenAt": taken, "ageMinutes": None}
    )
    report = Report(
        array=array,
        trigger=given.trigger,
        action="restored",
        evidence=state.assessment.evidence if state.assessment else [],
        set=SetRef.model_validate(told),
        message=message,
        restoreExecutionArn=restore_arn or None,
        restore=restored,
        lifecycleAction=None,
        protection=guard.as_dict(),
        notification=unsent or "sent",
    )
    return Finished(output=report)


def _mounted(state: RecoveryState, arn: str) -> dict[str, JsonValue]:
    """The report that the restore's array is mounted: Settle's, which it checked already, or
    RunRestore's RestoreUsable (whose cause is what reached the waiting Task, as JSON), checked
    here: what is not believed goes back to Settle (UntrustedReportError)."""
    if state.settled is not None and state.settled.status == "mounted":
        if state.settled.report is None:
            raise ValueError("succeeded: Settle found a mounted array but no report of it")
        return state.settled.report
    if state.usable is None:
        raise ValueError("succeeded: the run has no report of a mounted array")
    try:
        report = json.loads(state.usable.Cause)
    except json.JSONDecodeError:
        report = None
    return following.checked_report(report, state, arn)


def _mount_evidence(state: RecoveryState, settings: RecoveryStepSettings, arn: str) -> bool:
    """Whether the restore assembled and mounted the array (or may have: its cleanup kept
    volumes an md device or a mount uses on the target). Only what the restore itself said
    counts (the run's record of it, a report that was believed), never a tag alone: the restore
    tags its target before it attaches anything."""
    if state.settled is not None and state.settled.status == "mounted":
        return True
    waiting = awaited.awaited(settings.lock_table, following.restore_name(state))
    own = waiting is not None and waiting.parent_arn == state.execution.id
    said = waiting is not None and (
        waiting.outcome == awaited.MOUNTED
        or (waiting.outcome == awaited.FAILED and bool(waiting.kept))
    )
    if own and said:
        return True
    if state.usable is not None:
        try:
            following.checked_report(json.loads(state.usable.Cause), state, arn)
        except (UntrustedReportError, json.JSONDecodeError):
            return False
        return True
    return False


def _failed(state: RecoveryState, facts: SetFacts | None, mounted: bool) -> tuple[Failure, str]:
    """The named error and cause, the array's tag given back where the array is not on the
    target, and the lifecycle result: a launched instance that holds the mounted array goes into
    service with it."""
    array = state.input.array
    name, cause = _failure_named(state)
    attach = state.input.restore.mode == "attach"
    # A launch that ran out is being terminated: the array does not live on it.
    abandoned = state.error is not None and state.error.Error == "LaunchAbandonedError"
    on_target = _array_on_target(state) if attach and mounted and not abandoned else None
    cause += _unretire(state, on_target)
    if on_target:
        # The array lives there now, whatever failed after it was mounted: so does its alarm.
        cause += f" [protection: {follow(array, on_target).sentence()}]"
    if facts:
        cause += f" [{facts.sentence(array)}]"
    return Failure(error=name, cause=cause, lifecycleAction=None), (
        "CONTINUE" if on_target else "ABANDON"
    )


def _failure_named(state: RecoveryState) -> tuple[str, str]:
    """The error and cause the run fails with: the step's or the restore's. Where the wait for
    the restore ended without its answer (the Task's timeout, or RestoreUnanswered), what
    Settle found of the restore says it better."""
    error = state.error
    settled = state.settled
    unanswered = error is not None and error.Error in ("States.Timeout", "RestoreUnanswered")
    if unanswered and settled is not None and settled.restoreStatus:
        restore = settled.restoreStatus
        found = (settled.error or "", settled.cause or "")
        if restore in ("ABORTED", "TIMED_OUT", "FAILED"):
            return callbacks.parent_error(restore, found[0]), found[
                1
            ] or f"the restore ended {restore}"
        return "RestoreUnanswered", (
            f"the restore did not report a mounted array ({restore}); waited for: "
            f"{error.Error if error else '-'}"
        )
    return child_failure(error.dump() if error else {})


def _complete_lifecycle(state: RecoveryState, out: Failure, result: str) -> Failure:
    """Complete a launch's lifecycle action, and say which result it got. One no longer open
    was ended before: Auto Scaling's view of the instance says how. A launch that was to hold
    the mounted array (CONTINUE) and was abandoned instead fails the run LaunchAbandoned."""
    action = state.input.lifecycle
    if action is None:
        return out
    if lifecycle.complete(action.as_dict(), result):
        gone = (
            f" [lifecycle action of {action.instanceId} completed with ABANDON: "
            "the Auto Scaling group replaces the instance]"
            if result == "ABANDON"
            else f" [lifecycle action of {action.instanceId} completed with CONTINUE: "
            "it holds the mounted array]"
        )
        return out.model_copy(update={"lifecycleAction": result, "cause": out.cause + gone})
    ended = lifecycle.launch_outcome(action.as_dict())
    if ended == "CONTINUE":
        note = (
            f" [the lifecycle action of {action.instanceId} was completed with CONTINUE before: "
            "Auto Scaling shows the instance in service]"
        )
        return out.model_copy(update={"lifecycleAction": "CONTINUE", "cause": out.cause + note})
    if ended is None:
        raise ThrottledError(
            f"Auto Scaling has no open lifecycle action {action.lifecycleActionToken} but still "
            f"shows {action.instanceId} waiting: looked at again shortly"
        )
    ran_out = (
        f" [the lifecycle action of {action.instanceId} was no longer open and Auto Scaling "
        "shows the instance terminating or gone: its timeout ran out, and Auto Scaling ended "
        "it with the hook's default result, ABANDON]"
    )
    name = "LaunchAbandoned" if result == "CONTINUE" else out.error
    update = {"lifecycleAction": "ABANDON", "cause": out.cause + ran_out, "error": name}
    return out.model_copy(update=update)


def _array_on_target(state: RecoveryState) -> str | None:
    """The restore's target, if the array lives there now: the restore tags its target when it
    attaches, and its failure path takes the tag off again unless it kept the volumes because
    the array was assembled and mounted there (an assembled array is the user's)."""
    target = state.input.restore.targetInstanceId or ""
    array = state.input.array
    if not target or not array:
        return None
    instance_state, found = instance_facts(target)
    if instance_state in ("terminated", "shutting-down", "unknown"):
        return None
    return target if found.get(tags.ARRAY) == array else None


def _unretire(state: RecoveryState, array_on_target: str | None) -> str:
    """Give the array's tag back to the instance the recovery took it from, unless the array
    lives on the target after all. The intent comes from the run's input, not from what the
    target step recorded: a retried step finds the tag already gone and records nothing."""
    retired = (state.target.retired if state.target else None) or state.input.retire
    array = state.input.array
    if not retired or not array:
        return ""
    if array_on_target:
        return (
            f" [{array} stays on {array_on_target}, where the restore assembled and mounted it; "
            f"{retired} keeps no {tags.ARRAY} tag]"
        )
    if instance_facts(retired)[1].get(tags.ARRAY) == array:
        return ""
    tag_array(retired, array)
    return f" [{retired} is tagged {tags.ARRAY}={array} again: backups follow it as before]"


def _notify_recovered(subject: str, message: str) -> str | None:
    """Tell the operators; a notification that cannot be sent does not undo a recovery."""
    try:
        notify(subject, message)
    except ClientError as err:
        logger.exception("recovery notification not sent", extra={"subject": subject})
        return f"not sent: {error_code(err)}"
    return None
