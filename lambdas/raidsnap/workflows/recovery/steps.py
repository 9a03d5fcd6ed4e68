"""Recovery workflow steps: look for evidence that a member is impaired, wait for the target,
start and follow the restore (keeping a lifecycle action alive, completing it once the array is
assembled), and at the end name the outcome (finish)."""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any

from raidsnap import tags
from raidsnap.aws import claims, executions, instances, lifecycle
from raidsnap.aws.instances import instance_facts, untag_array
from raidsnap.aws.notifications import notify
from raidsnap.environment import RecoveryStepSettings
from raidsnap.errors import InstanceNotReadyError, public_name
from raidsnap.observability import count, for_array, logger
from raidsnap.workflows.recovery import assessment
from raidsnap.workflows.recovery.events import event_time
from raidsnap.workflows.recovery.finish import finish

TARGET_POLL_SECONDS = 15
# A launching instance boots and registers its SSM agent within a few minutes; past this the
# recovery gives up (and a lifecycle action is abandoned).
TARGET_BUDGET_SECONDS = 900
# A restore's states once its array is assembled and mounted (restore.asl.json).
ASSEMBLED_STATES = frozenset(
    {"Prewarm", "WaitForPrewarm", "PollPrewarm", "IsPrewarmed", "Finish", "FinishedWithWarnings"}
)
FOLLOW_POLL_SECONDS = 300


def run(step: str, state: dict[str, Any], settings: RecoveryStepSettings) -> dict[str, Any]:
    """The recovery state machine's one Lambda step, by name."""
    if step == "assess":
        return assess(state, settings.discover_document)
    if step == "target":
        return check_target(state)
    if step == "restore":
        return start_restore(state, settings.restore_state_machine_arn)
    if step == "follow":
        return follow_restore(state)
    if step == "none":
        return no_action(state, settings.lock_table)
    if step not in ("succeeded", "failed"):
        raise ValueError(f"unknown recovery step {step!r}")
    array = (state.get("input") or {}).get("array")
    if array:
        for_array(str(array))
    count("RecoverySucceeded" if step == "succeeded" else "RecoveryFailed")
    return finish(state, step, settings.lock_table)


def assess(state: dict[str, Any], discover_document: str) -> dict[str, Any]:
    """Is there evidence that a member is impaired? Only an alarm needs it: a terminated
    instance and a launch into the array's group are the evidence themselves."""
    given = state.get("input") or {}
    look = dict(state.get("assessment") or {})
    if given.get("trigger") != "alarm" or not given.get("alarmedInstanceId"):
        return {"status": "act", "evidence": [str(n) for n in given.get("notes") or []]}
    if not look:
        return assessment.start(
            str(given["array"]), str(given["alarmedInstanceId"]), discover_document
        )
    return assessment.poll(look)


def reference_time(state: dict[str, Any]) -> datetime:
    """The time of the event that started the recovery: a set's age is told against it."""
    return event_time(((state.get("input") or {}).get("event") or {}).get("time"))


def no_action(state: dict[str, Any], table: str) -> dict[str, Any]:
    """The alarm fired, but no member of the array is impaired: replace nothing, say why."""
    given = state.get("input") or {}
    array = str(given.get("array"))
    look = state.get("assessment") or {}
    facts = assessment.latest_set(array, reference_time(state))
    instance = given.get("alarmedInstanceId")
    message = (
        f"The attached EBS alarm of {instance} fired, but no member of {array} is impaired: "
        f"EC2's status checks of members {look.get('checked')} passed"
        + (
            ", and the instance reports the array healthy"
            if look.get("discovery") == "done"
            else f" (the instance could not be asked: {look.get('discovery')})"
        )
        + ". The alarm covers every attached volume (the boot volume and scratch volumes "
        "too); no recovery was started and the array was not touched. "
        + (
            "If it needs restoring after all: " + facts.sentence(array) + "."
            if facts
            else f"{array} has no complete set."
        )
    )
    notify(f"raidsnap: {array} alarm, no member impaired, nothing replaced", message)
    claims.unclaim(table, array, str((state.get("execution") or {}).get("name") or ""))
    return {
        "output": {
            "array": array,
            "trigger": given.get("trigger"),
            "action": "none",
            "checked": look.get("checked"),
            "discovery": look.get("discovery"),
            "set": facts.as_dict() if facts else None,
            "message": message,
        }
    }


def start_restore(state: dict[str, Any], restore_machine_arn: str) -> dict[str, Any]:
    """Start the restore (named after this execution, so a retried step starts no second one)
    and tell the operators which set it restores and what that means for their data."""
    given = state.get("input") or {}
    array = str(given.get("array"))
    name = f"{(state.get('execution') or {}).get('name')}-restore"
    started = executions.start(restore_machine_arn, name, given["restore"])
    arn = started.arn if started else executions.arn_of(restore_machine_arn, name)
    facts = assessment.latest_set(array, reference_time(state))
    restore = given["restore"]
    evidence = (state.get("assessment") or {}).get("evidence") or []
    notify(
        f"raidsnap: recovering {array}",
        f"Recovery of {array}: restoring onto {restore.get('targetInstanceId') or 'its instance'} "
        f"in {restore.get('mode')} mode (restore {arn}), because: {'; '.join(evidence)}. "
        + (facts.sentence(array) + "." if facts else f"{array} has no complete set."),
    )
    return {
        "executionArn": arn,
        "status": "running",
        "waitSeconds": _follow_wait(state),
        "lifecycleAction": None,
        "heartbeats": 0,
    }


def _follow_wait(state: dict[str, Any]) -> int:
    """Often enough to keep a lifecycle action alive (a third of its heartbeat timeout)."""
    if not (state.get("input") or {}).get("lifecycle"):
        return FOLLOW_POLL_SECONDS
    third = int(os.environ.get("LIFECYCLE_HEARTBEAT_SECONDS", "3600")) // 3
    return max(30, min(FOLLOW_POLL_SECONDS, third))


def follow_restore(state: dict[str, Any]) -> dict[str, Any]:
    """One look at the restore. A launching instance's lifecycle action gets a heartbeat while
    the restore runs, and CONTINUE as soon as the array is assembled and mounted (its prewarm
    may read for hours longer; the instance is usable meanwhile)."""
    r = dict(state["restore"])
    desc = executions.describe(r["executionArn"])
    status = desc["status"]
    action = (state.get("input") or {}).get("lifecycle")
    if action and r.get("lifecycleAction") is None:
        if status == "SUCCEEDED" or (
            status == "RUNNING" and executions.newest_state(r["executionArn"]) in ASSEMBLED_STATES
        ):
            lifecycle.complete(action, "CONTINUE")
            r["lifecycleAction"] = "CONTINUE"
        elif status == "RUNNING":
            r["heartbeats"] = int(r.get("heartbeats") or 0) + lifecycle.heartbeat(action)
    if status == "RUNNING":
        return dict(r, status="running", waitSeconds=_follow_wait(state))
    if status == "SUCCEEDED":
        return dict(r, status="succeeded", output=json.loads(desc.get("output") or "{}"))
    cause = str(desc.get("cause") or "")
    if status in ("ABORTED", "TIMED_OUT") and not desc.get("error"):
        word = "stopped" if status == "ABORTED" else "timed out"
        error = "RestoreAborted" if status == "ABORTED" else "RestoreTimedOut"
        cause = f"the restore {r['executionArn']} was {word} before it finished"
    else:
        error = public_name(str(desc.get("error") or "RestoreFailed"))
        cause += f" (restore {r['executionArn']})"
    return dict(r, status="failed", error={"Error": error, "Cause": cause})


def check_target(state: dict[str, Any]) -> dict[str, Any]:
    """Is the restore's target running with its SSM agent online? A launching instance needs a
    few minutes; the restore itself would refuse an instance whose agent is not online yet."""
    target = dict(state.get("target") or {})
    restore = (state.get("input") or {}).get("restore") or {}
    instance_id = str(restore.get("targetInstanceId", ""))
    if not target:
        target = {"budgetSeconds": TARGET_BUDGET_SECONDS, "waitSeconds": TARGET_POLL_SECONDS}
    else:
        target["budgetSeconds"] = int(target["budgetSeconds"]) - int(target["waitSeconds"])
    if not instance_id:
        return dict(target, status="ready")  # the restore resolves the array's instance
    instance_state = instance_facts(instance_id)[0]
    agent = instances.agent(instance_id) if instance_state == "running" else None
    if agent is not None and agent.online and agent.too_old:
        # Waiting does not make an agent newer: refuse now, before any tag is moved.
        raise InstanceNotReadyError(
            f"recovery target: {agent.too_old_reason()}; nothing was restored"
        )
    if agent is not None and agent.online:
        # Only once the restore can start: a recovery that ends here leaves the tags as they were.
        retired = _retire((state.get("input") or {}).get("retire"), restore)
        return dict(target, status="ready", instanceId=instance_id, retired=retired)
    if instance_state in ("shutting-down", "terminated", "stopping", "stopped", "unknown"):
        raise InstanceNotReadyError(
            f"recovery target {instance_id} is {instance_state}; nothing was restored"
        )
    if target["budgetSeconds"] <= 0:
        raise InstanceNotReadyError(
            f"the SSM agent of recovery target {instance_id} did not come online within "
            f"{TARGET_BUDGET_SECONDS} s ({instance_state}); nothing was restored. Check the "
            "instance profile and the agent, then start a restore"
        )
    return dict(target, status="waiting", instanceId=instance_id)


def _retire(instance_id: str | None, restore: dict[str, Any]) -> str | None:
    """Take the array's tag off a failed instance that still runs (only that tag, only if it
    names this array), so that the restore makes the replacement the array's instance."""
    array = str(restore.get("array", ""))
    if not instance_id or not array or instance_facts(instance_id)[1].get(tags.ARRAY) != array:
        return None
    untag_array(instance_id, array)
    logger.info("array tag moved off the failed instance", extra={"instance": instance_id})
    return instance_id
