"""The end of a recovery: the lifecycle action completed, the claim given back, the array's tag
and alarm where the array is, and an output (or named error) that says which set was restored
and what its age means for the user's data."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from raidsnap import tags
from raidsnap.aws import claims, error_code, lifecycle
from raidsnap.aws.instances import instance_facts, tag_array
from raidsnap.aws.notifications import notify
from raidsnap.observability import logger
from raidsnap.plan.causes import child_failure
from raidsnap.plan.set_facts import SetFacts, age_text
from raidsnap.workflows.recovery import assessment
from raidsnap.workflows.recovery.events import event_time
from raidsnap.workflows.recovery.protection import follow


def finish(state: dict[str, Any], outcome: str, table: str) -> dict[str, Any]:
    """Complete the lifecycle action (if any, and not completed yet) with CONTINUE or ABANDON,
    give the array's recovery claim back, and shape the run's output, or its named error and
    cause. Both name the set restored, its age, and that writes after it are not in it."""
    given = state.get("input") or {}
    array = str(given.get("array"))
    event = given.get("event") or {}
    facts = assessment.latest_set(array, event_time(event.get("time")))
    if outcome == "succeeded":
        out, result = _succeeded(state, facts), "CONTINUE"
    else:
        out, result = _failed(state, facts)
    claims.unclaim(table, array, str((state.get("execution") or {}).get("name") or ""))
    _complete_lifecycle(state, out, result, outcome == "succeeded")
    return out


def _succeeded(state: dict[str, Any], facts: SetFacts | None) -> dict[str, Any]:
    given = state.get("input") or {}
    array = str(given.get("array"))
    restore = state.get("restore") or {}
    restored = restore.get("output") or {}
    taken = restored.get("setTakenAt")
    same_set = facts is not None and facts.set_id == restored.get("setId")
    message = (
        f"{array} was restored from set {restored.get('setId')}, taken {taken}"
        + (
            f" ({age_text(facts.age_minutes)} before the {given.get('trigger')})"
            if facts and same_set
            else ""
        )
        + f"; writes made after that time to {array} are not in it"
    )
    target = str(restored.get("targetInstanceId") or given["restore"].get("targetInstanceId"))
    guard = follow(array, target)
    message += ". Protection: " + guard.sentence()
    unsent = _notify_recovered(f"raidsnap: {array} recovered onto {target}", message)
    return {
        "output": {
            "array": array,
            "trigger": given.get("trigger"),
            "action": "restored",
            "evidence": (state.get("assessment") or {}).get("evidence") or [],
            "set": facts.as_dict()
            if facts and same_set
            else {"setId": restored.get("setId"), "takenAt": taken, "ageMinutes": None},
            "message": message,
            "restoreExecutionArn": restore.get("executionArn"),
            "restore": restored,
            "lifecycleAction": None,
            "protection": guard.as_dict(),
            "notification": unsent or "sent",
        }
    }


def _failed(state: dict[str, Any], facts: SetFacts | None) -> tuple[dict[str, Any], str]:
    """The named error and cause, the array's tag given back where the array is not on the
    target, and the lifecycle result: a launched instance that holds the mounted array goes into
    service with it."""
    given = state.get("input") or {}
    array = str(given.get("array"))
    restore = state.get("restore") or {}
    error, cause = child_failure(state.get("error") or restore.get("error") or {})
    moving = given.get("restore", {}).get("mode") == "attach"
    on_target = _array_on_target(state) if moving else None
    cause += _unretire(state, on_target)
    if on_target:
        # The array lives there now, whatever failed after it was mounted: so does its alarm.
        cause += f" [protection: {follow(array, on_target).sentence()}]"
    if facts:
        cause += f" [{facts.sentence(array)}]"
    out = {"error": error, "cause": cause, "lifecycleAction": None}
    return out, "CONTINUE" if on_target else "ABANDON"


def _complete_lifecycle(
    state: dict[str, Any], out: dict[str, Any], result: str, succeeded: bool
) -> None:
    """Complete a launch's lifecycle action unless following the restore completed it once the
    array was assembled, and say which result it got."""
    action = (state.get("input") or {}).get("lifecycle")
    if not action:
        return
    restore = state.get("restore") or {}
    target = out["output"] if succeeded else out
    if restore.get("lifecycleAction"):
        target["lifecycleAction"] = str(restore["lifecycleAction"])
        return
    lifecycle.complete(action, result)
    target["lifecycleAction"] = result
    if succeeded:
        return
    out["cause"] += (
        f" [lifecycle action of {action['instanceId']} completed with ABANDON: "
        "the Auto Scaling group replaces the instance]"
        if result == "ABANDON"
        else f" [lifecycle action of {action['instanceId']} completed with CONTINUE: "
        "it holds the mounted array]"
    )


def _array_on_target(state: dict[str, Any]) -> str | None:
    """The restore's target, if the array lives there now: the restore tags its target when it
    attaches, and its failure path takes the tag off again unless it kept the volumes because
    the array was assembled and mounted there (an assembled array is the user's)."""
    given = state.get("input") or {}
    target = str((given.get("restore") or {}).get("targetInstanceId") or "")
    array = str(given.get("array", ""))
    if not target or not array:
        return None
    instance_state, found = instance_facts(target)
    if instance_state in ("terminated", "shutting-down", "unknown"):
        return None
    return target if found.get(tags.ARRAY) == array else None


def _unretire(state: dict[str, Any], array_on_target: str | None) -> str:
    """Give the array's tag back to the instance the recovery took it from, unless the array
    lives on the target after all. The intent comes from the run's input, not from what the
    target step recorded: a retried step finds the tag already gone and records nothing."""
    given = state.get("input") or {}
    retired = (state.get("target") or {}).get("retired") or given.get("retire")
    array = str(given.get("array", ""))
    if not retired or not array:
        return ""
    if array_on_target:
        return (
            f" [{array} stays on {array_on_target}, where the restore assembled and mounted it; "
            f"{retired} keeps no {tags.ARRAY} tag]"
        )
    if instance_facts(str(retired))[1].get(tags.ARRAY) == array:
        return ""
    tag_array(str(retired), array)
    return f" [{retired} is tagged {tags.ARRAY}={array} again: backups follow it as before]"


def _notify_recovered(subject: str, message: str) -> str | None:
    """Tell the operators; a notification that cannot be sent does not undo a recovery."""
    try:
        notify(subject, message)
    except ClientError as err:
        logger.exception("recovery notification not sent", extra={"subject": subject})
        return f"not sent: {error_code(err)}"
    return None
