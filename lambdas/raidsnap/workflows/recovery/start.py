"""The EventBridge target: an event about a failing array becomes one recovery run.

Each event maps to one execution name, so an event delivered twice starts one recovery; one
recovery of an array runs at a time (its claim), and a drill never stands in its way.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from pydantic import JsonValue

from raidsnap.aws import claims, executions, lock
from raidsnap.aws.notifications import notify
from raidsnap.environment import RecoverySettings
from raidsnap.observability import logger
from raidsnap.workflows.recovery.assessment import latest_set
from raidsnap.workflows.recovery.contracts import BusEvent, EventRef, RecoveryInput, StartAnswer
from raidsnap.workflows.recovery.events import Skip, Trigger, classify, event_time


def start(event: BusEvent, settings: RecoverySettings) -> StartAnswer:
    """Start one recovery for the event, or say why not (to the operators as well: a recovery
    that does not start is news). Never raises for an event that is simply not ours:
    EventBridge would only deliver it again."""
    logger.append_keys(event_id=event.id, detail_type=event.detail_type)
    trigger = classify(event, settings)
    if trigger is None:
        return StartAnswer(started=False, reason="not a recovery event for a raidsnap array")
    if isinstance(trigger, Skip):
        logger.warning(
            "no recovery started", extra={"array": trigger.array, "reason": trigger.reason}
        )
        facts = latest_set(trigger.array, event_time(event.time))
        notify(
            f"raidsnap: no recovery of {trigger.array} started",
            f"A {trigger.kind} event ({event.detail_type}, {event.time}) started "
            f"no recovery: {trigger.reason}. "
            + (facts.sentence(trigger.array) + "." if facts else "It has no complete set."),
        )
        return StartAnswer(started=False, array=trigger.array, reason=trigger.reason)
    name = trigger.execution_name
    # One recovery of an array at a time: a flapping alarm (ALARM, OK, ALARM) must not start
    # one replace per transition. The claim is this execution's until it ends.
    repeat = claims.claimed_by(settings.lock_table, trigger.array) == name
    other = claims.claim(settings.lock_table, trigger.array, name, settings.state_machine_arn)
    if other is not None:
        reason = (
            f"already recovering {trigger.array}: a recovery of it is already running "
            f"({other}); this {trigger.kind} event started no second recovery"
        )
        _skipped(trigger, event, reason)
        return StartAnswer(started=False, array=trigger.array, reason=reason)
    in_the_way = _make_way(trigger, event, settings)
    if in_the_way is not None:
        return in_the_way
    return _launch(trigger, event, settings, repeat)


def _make_way(trigger: Trigger, event: BusEvent, settings: RecoverySettings) -> StartAnswer | None:
    """The run holding the array's restore lock: a drill's restore is stopped; this event's own
    restore makes the event a repeat; any other restore means no recovery now."""
    name = trigger.execution_name
    holder = lock.current(settings.lock_table, trigger.array)
    if holder is None or holder.lease_until <= int(time.time()):
        return None
    if not lock.running(holder.execution_arn):
        return None
    if is_drill(holder.execution_arn):
        # A drill must never stand between an array and its recovery: stop the drill's restore
        # (its drill then removes what that restore created, and reports the drill failed).
        executions.stop(
            holder.execution_arn,
            "PreemptedByRecovery",
            f"a recovery of {trigger.array} needs the array's restore lock",
        )
        trigger.notes.append(f"stopped the drill restore {holder.execution_arn} to recover")
        logger.warning("stopped a drill's restore", extra={"holder": holder.execution_arn})
        return None
    if holder.execution_arn.endswith(f":{name}-restore"):
        # This very event's recovery is running (its restore holds the lock): a repeat delivery.
        logger.info("recovery for this event is running", extra={"execution_name": name})
        return StartAnswer(started=False, array=trigger.array, name=name, reason="duplicate")
    claims.unclaim(settings.lock_table, trigger.array, name)
    reason = f"a restore of {trigger.array} is already running ({holder.execution_arn})"
    logger.warning("no recovery started", extra={"array": trigger.array, "reason": reason})
    _skipped(trigger, event, reason)
    return StartAnswer(started=False, array=trigger.array, reason=reason)


def _launch(
    trigger: Trigger, event: BusEvent, settings: RecoverySettings, repeat: bool
) -> StartAnswer:
    name = trigger.execution_name
    asked_at = datetime.now(UTC)
    started = executions.start(settings.state_machine_arn, name, _payload(trigger, event))
    if started is None:
        logger.info("recovery for this event already started", extra={"execution_name": name})
        return StartAnswer(started=False, array=trigger.array, name=name, reason="duplicate")
    if repeat and started.start_date < asked_at:
        # The same name and input as a running execution: StartExecution answered with that
        # execution (StartExecution, Step Functions API Reference).
        logger.info("recovery for this event is running", extra={"execution": started.arn})
        return StartAnswer(
            started=False,
            array=trigger.array,
            name=name,
            executionArn=started.arn,
            reason="duplicate",
        )
    logger.info("recovery started", extra={"array": trigger.array, "execution": started.arn})
    return StartAnswer(started=True, array=trigger.array, name=name, executionArn=started.arn)


def _payload(trigger: Trigger, event: BusEvent) -> dict[str, JsonValue]:
    """The recovery's execution input (contracts.RecoveryInput)."""
    run = RecoveryInput(
        array=trigger.array,
        trigger=trigger.kind,
        event=EventRef(
            id=event.id,
            source=event.source,
            detailType=event.detail_type,
            time=event.time,
            resources=event.resources or [],
        ),
        restore=trigger.restore,
        lifecycle=trigger.lifecycle,
        retire=trigger.retire,
        alarmedInstanceId=trigger.alarmed,
        notes=trigger.notes,
    )
    return run.dump()


def _skipped(trigger: Trigger, event: BusEvent, reason: str) -> None:
    facts = latest_set(trigger.array, event_time(event.time))
    notify(
        f"raidsnap: no recovery of {trigger.array} started",
        f"A {trigger.kind} event for {trigger.array} ({event.detail_type}, "
        f"{event.time}) started no recovery: {reason}. "
        + (facts.sentence(trigger.array) + "." if facts else "It has no complete set.")
        + " Check the running restore or recovery; start a restore by hand if the array still "
        "needs one once it has ended.",
    )


def is_drill(execution_arn: str) -> bool:
    """Restores a drill starts are named drill-<hash> (see the drill workflow)."""
    return execution_arn.rsplit(":", 1)[-1].startswith("drill-")
