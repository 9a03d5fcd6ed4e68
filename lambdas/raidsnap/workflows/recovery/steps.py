"""Recovery workflow steps: look for evidence that a member is impaired, wait for the target,
start the restore (which reports back once its array is mounted, or that it failed), keep a
launch's lifecycle action alive meanwhile, settle what became of a restore that did not report
(following), and at the end name the outcome (finish)."""

from __future__ import annotations

from datetime import datetime

from pydantic import JsonValue

from raidsnap import tags
from raidsnap.aws import claims, costs, instances
from raidsnap.aws.instances import instance_facts, untag_array
from raidsnap.aws.notifications import notify
from raidsnap.environment import RecoveryStepSettings
from raidsnap.errors import InstanceNotReadyError
from raidsnap.models import Contract, Poll
from raidsnap.observability import count, for_array, logger
from raidsnap.plan.set_facts import SetFacts
from raidsnap.workflows.recovery import assessment, following
from raidsnap.workflows.recovery.contracts import (
    Degraded,
    Finished,
    Look,
    RecoveryState,
    Report,
    SetRef,
    StepCall,
    TargetWait,
)
from raidsnap.workflows.recovery.events import event_time
from raidsnap.workflows.recovery.finish import finish

TARGET_POLL_SECONDS = 15
# A launching instance boots and registers its SSM agent within a few minutes; past this the
# recovery gives up (and a lifecycle action is abandoned).
TARGET_BUDGET_SECONDS = 900


def run(call: StepCall, settings: RecoveryStepSettings) -> Contract:
    """The recovery state machine's one Lambda step, by name: the run's object in, the step's
    result (for its own key) out."""
    state = call.state
    if call.step == "assess":
        return assess(state, settings.discover_document)
    if call.step == "target":
        return check_target(state)
    if call.step == "restore":
        return following.start_restore(state, settings, call.taskToken)
    if call.step == "heartbeat":
        return following.keep_alive(state, settings)
    if call.step == "settle":
        return following.settle(state, settings)
    if call.step == "none":
        return with_cost(state, no_action(state, settings.lock_table))
    for_array(state.input.array)
    count("RecoverySucceeded" if call.step == "succeeded" else "RecoveryFailed")
    return with_cost(state, finish(state, call.step, settings))


def with_cost(state: RecoveryState, out: Contract) -> Contract:
    """A finished recovery's output with its own cost so far and its Done state (the restore it
    started reports its own, in its output: the recovery ends once the array is mounted, while
    a prewarm may go on). It comes after the lifecycle action was completed and the array
    handed over: nothing that goes wrong reading or pricing the history (a network timeout
    after the SDK's retries, a throttle, an event it does not know) may fail the run then; the
    output says the cost is unavailable, and raidsnap status computes it from the history."""
    if not isinstance(out, Finished) or not state.execution.id:
        return out
    try:
        cost: dict[str, JsonValue] = costs.so_far(
            state.execution.id, after=1, array=state.input.array
        )
    except Exception as err:  # the recovery is done, whatever becomes of its cost
        logger.exception("the recovery's cost could not be computed")
        cost = {
            "unavailable": f"{type(err).__name__}: {err}"[:300]
            + f"; raidsnap status {state.execution.id} computes it"
        }
    return Finished(output=out.output.model_copy(update={"cost": cost}))


def assess(state: RecoveryState, discover_document: str) -> Look:
    """Is there evidence that a member is impaired? Only an alarm needs it: a terminated
    instance and a launch into the array's group are the evidence themselves."""
    given = state.input
    if given.trigger != "alarm" or not given.alarmedInstanceId:
        return Look(status="act", evidence=list(given.notes))
    if state.assessment is None:
        return assessment.start(given.array, given.alarmedInstanceId, discover_document)
    return assessment.poll(state.assessment)


def reference_time(state: RecoveryState) -> datetime:
    """The time of the event that started the recovery: a set's age is told against it."""
    return event_time(state.input.event.time)


def no_action(state: RecoveryState, table: str) -> Finished:
    """The alarm fired, but no member of the array is impaired, or the array is redundant and
    md still serves it: replace nothing, say why (and, degraded, how to replace the member)."""
    array = state.input.array
    look = state.assessment or Look()
    facts = assessment.latest_set(array, reference_time(state))
    if look.degraded is not None:
        return _degraded(state, look, facts, table)
    message = (
        f"The attached EBS alarm of {state.input.alarmedInstanceId} fired, but no member of "
        f"{array} is impaired: EC2's status checks of members {look.checked} passed"
        + (
            ", and the instance reports the array healthy"
            if look.discovery == "done"
            else f" (the instance could not be asked: {look.discovery})"
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
    claims.unclaim(table, array, state.execution.name)
    report = Report(
        array=array,
        trigger=state.input.trigger,
        action="none",
        checked=look.checked,
        discovery=look.discovery,
        set=SetRef.model_validate(facts.as_dict()) if facts else None,
        message=message,
    )
    return Finished(output=report)


def _degraded(state: RecoveryState, look: Look, facts: SetFacts | None, table: str) -> Finished:
    array = state.input.array
    d = look.degraded or Degraded()
    failed = (
        "; ".join(
            f"{f.volumeId}"
            + (f" (slot {f.slot})" if f.slot is not None else "")
            + (f" as {f.device}" if f.device else "")
            for f in d.failed
        )
        or "a member"
    )
    if d.seen:
        state_line = (
            f"{array} is a {d.level} array and md still serves it as {d.device}, degraded: "
            f"member {failed} failed ({'; '.join(look.evidence)})."
        )
        steps = " To replace the failed member while the array stays in service, on "
        steps += f"{look.instanceId}: " + "; then ".join(d.commands) + "."
    else:
        state_line = (
            f"{array} is a {d.level} array, so md may still serve it with member {failed} "
            f"failed ({'; '.join(look.evidence)}), but the instance could not be asked "
            f"({look.discovery})."
        )
        steps = (
            f" Check on {look.instanceId} with `cat /proc/mdstat` and `mdadm --detail` which "
            "member md marked faulty, and replace it with mdadm --fail, --remove and --add."
        )
    message = (
        f"The attached EBS alarm of {state.input.alarmedInstanceId} fired. {state_line} No "
        "recovery was started and nothing was detached: rolling a redundant array back to its "
        "newest set would take every write since that set out of service." + steps + " Only if "
        f"the array must go back to a set after all: `raidsnap restore {array} --mode replace` "
        "(writes since the set are lost). "
        + (facts.sentence(array) + "." if facts else f"{array} has no complete set.")
    )
    notify(f"raidsnap: {array} is degraded, md still serves it, nothing replaced", message)
    claims.unclaim(table, array, state.execution.name)
    report = Report(
        array=array,
        trigger=state.input.trigger,
        action="degraded",
        evidence=look.evidence,
        checked=look.checked,
        discovery=look.discovery,
        degraded=d,
        set=SetRef.model_validate(facts.as_dict()) if facts else None,
        message=message,
    )
    return Finished(output=report)


def check_target(state: RecoveryState) -> TargetWait:
    """Is the restore's target running with its SSM agent online? A launching instance needs a
    few minutes; the restore itself would refuse an instance whose agent is not online yet."""
    if state.target is None:
        poll = Poll(TARGET_POLL_SECONDS, TARGET_BUDGET_SECONDS)
        target = TargetWait(budgetSeconds=poll.budget_seconds, waitSeconds=poll.wait_seconds)
    else:
        poll = Poll(state.target.waitSeconds, state.target.budgetSeconds).waited()
        target = state.target.model_copy(update={"budgetSeconds": poll.budget_seconds})
    instance_id = state.input.restore.targetInstanceId or ""
    if not instance_id:
        return target.model_copy(update={"status": "ready"})  # the restore resolves it
    instance_state = instance_facts(instance_id)[0]
    agent = instances.agent(instance_id) if instance_state == "running" else None
    if agent is not None and agent.online and agent.too_old:
        # Waiting does not make an agent newer: refuse now, before any tag is moved.
        raise InstanceNotReadyError(
            f"recovery target: {agent.too_old_reason()}; nothing was restored"
        )
    if agent is not None and agent.online:
        # Only once the restore can start: a recovery that ends here leaves the tags as they were.
        retired = _retire(state.input.retire, state.input.array)
        ready = {"status": "ready", "instanceId": instance_id, "retired": retired}
        return target.model_copy(update=ready)
    if instance_state in ("shutting-down", "terminated", "stopping", "stopped", "unknown"):
        raise InstanceNotReadyError(
            f"recovery target {instance_id} is {instance_state}; nothing was restored"
        )
    if poll.spent:
        raise InstanceNotReadyError(
            f"the SSM agent of recovery target {instance_id} did not come online within "
            f"{TARGET_BUDGET_SECONDS} s ({instance_state}); nothing was restored. Check the "
            "instance profile and the agent, then start a restore"
        )
    return target.model_copy(update={"status": "waiting", "instanceId": instance_id})


def _retire(instance_id: str | None, array: str) -> str | None:
    """Take the array's tag off a failed instance that still runs (only that tag, only if it
    names this array), so that the restore makes the replacement the array's instance."""
    if not instance_id or not array or instance_facts(instance_id)[1].get(tags.ARRAY) != array:
        return None
    untag_array(instance_id, array)
    logger.info("array tag moved off the failed instance", extra={"instance": instance_id})
    return instance_id
