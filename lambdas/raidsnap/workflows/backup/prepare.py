"""Backup, first steps: validate the input, hold the array against restores, find the instance,
discover the array's members on it."""

from __future__ import annotations

from typing import Any

from raidsnap import sets
from raidsnap.aws import commands, instances, lock
from raidsnap.environment import BackupSettings, Documents, restore_lock_table, retention_for
from raidsnap.models import BackupInput, Poll, parse_input, system_directory
from raidsnap.observability import logger
from raidsnap.workflows.backup import times

State = dict[str, Any]

DISCOVERY_POLL_SECONDS = 3


def _hold_seconds(settings: BackupSettings) -> int:
    """How long a backup's hold lasts at most if the run dies without letting go: discovery,
    the freeze and half an hour for the rest of the snapshot step and its retries."""
    return settings.discovery_timeout_seconds + settings.max_freeze_seconds + 1800


def release_hold(state: State) -> None:
    """Let restores of the array run again (the snapshots are taken, or the run failed)."""
    table = restore_lock_table()
    if table and state.get("hold"):
        lock.release_backup(table, state["array"], str(state["execution"]["arn"]))
        state["hold"] = False


def prepare(event: dict[str, Any], documents: Documents, settings: BackupSettings) -> State:
    """Validate the input, find the instance, and start discovery on it if its agent is up."""
    request = parse_input(BackupInput, event.get("input"))
    execution = event.get("execution") or {}
    table = restore_lock_table()
    if not table:
        return _prepare(request, execution, documents, settings)
    # Before anything reaches the instance: a restore of this array that is running refuses
    # the backup (RestoreInProgress), and a restore that starts later sees the hold.
    arn = str(execution.get("id", ""))
    lock.hold_for_backup(table, request.array, arn, _hold_seconds(settings))
    try:
        state = _prepare(request, execution, documents, settings)
    except Exception:
        lock.release_backup(table, request.array, arn)
        raise
    state["hold"] = True
    return state


def _prepare(
    request: BackupInput, execution: dict[str, Any], documents: Documents, settings: BackupSettings
) -> State:
    instance = instances.find_instance(request.array)
    started = times.parse_time(str(execution.get("startTime") or times.iso(times.now())))
    state: State = {
        "array": request.array,
        "consistency": request.consistency or "crash",
        "trigger": request.trigger,
        "retention": retention_for(request.array, settings.default_retention),
        "execution": {"arn": execution.get("id", ""), "startTime": times.iso(started)},
        "setId": sets.make_set_id(request.array, started, str(execution.get("id", ""))),
        "instanceId": instance.instance_id,
        "availabilityZone": instance.availability_zone,
        "notes": [],
    }
    logger.append_keys(array=request.array, set_id=state["setId"])
    agent = instances.agent(instance.instance_id)
    if not agent.online:
        state["discovery"] = {"status": "skipped", "reason": "SSM agent is not online"}
        return state
    if agent.too_old:
        # Discovery cannot run safely (the script would get no parameters): members come from
        # the volume tags, and a freeze cannot run either (see collect_members).
        state["discovery"] = {"status": "skipped", "reason": agent.too_old_reason()}
        state["agentTooOld"] = agent.version
        return state
    command_id = commands.send(
        documents.discover,
        instance.instance_id,
        {"ArrayName": request.array},
        comment=f"raidsnap discover {request.array}",
        timeout=settings.discovery_timeout_seconds,
    )
    state["discovery"] = {
        "status": "pending",
        "commandId": command_id,
        **Poll(DISCOVERY_POLL_SECONDS, settings.discovery_timeout_seconds).as_dict(),
    }
    return state


def collect_members(state: State) -> State:
    """Members from the discover report, or from volume tags where discovery cannot tell."""
    instance = instances.describe_instance(state["instanceId"])
    discovery = state["discovery"]
    layout: instances.Layout | None = None
    note = str(discovery.get("reason", ""))
    if discovery["status"] == "pending":
        waiting, layout, note = _look_at_discovery(state, discovery, instance)
        if waiting:
            return state
    if layout is None:
        layout = instances.members_from_tags(state["array"], instance, note or "no discovery")
        logger.warning("members from volume tags", extra={"reason": layout.note})
    state["discovery"] = {"status": "done", "source": layout.source, "note": layout.note}
    state["members"] = [
        {"index": m.index, "volumeId": m.volume_id, "device": m.device} for m in layout.members
    ]
    state["md"] = layout.md
    state["memberCount"] = layout.member_count
    if layout.without_slot:
        state["notes"].append(
            f"not members (spares, or members md marked faulty): {', '.join(layout.without_slot)}"
        )
    if layout.degraded:
        # The set is still taken: what the working members hold is better than nothing, and
        # an operator may need it. It is marked degraded and never restored as latest.
        state["degraded"] = {
            "missingSlots": list(layout.missing_slots),
            "withoutSlot": list(layout.without_slot),
        }
        logger.warning(
            "the array is degraded; its set will be marked degraded",
            extra={"missing_slots": layout.missing_slots, "without_slot": layout.without_slot},
        )
    mount_point = layout.md.get("mountPoint")
    if state["consistency"] == "fsfreeze" and state.get("agentTooOld"):
        # The freeze document cannot run on this agent; a crash-consistent set is what the
        # design takes when the instance cannot help (as with discovery), and it says why.
        state["consistency"] = "crash"
        state["notes"].append(
            f"fsfreeze was asked for but the SSM agent of {state['instanceId']} is version "
            f"{state['agentTooOld']}, older than {instances.ENV_VAR_MIN_AGENT_VERSION}: the freeze "
            "document cannot run there, so the set is crash-consistent; update the agent"
        )
    elif state["consistency"] == "fsfreeze" and not mount_point:
        state["consistency"] = "crash"
        state["notes"].append(
            "fsfreeze was asked for but the mount point is unknown; the set is crash-consistent"
        )
    elif state["consistency"] == "fsfreeze" and system_directory(str(mount_point)):
        # The freeze document refuses system directories (and /srv, /home... themselves), as
        # restores do: the set is still taken, crash-consistent.
        state["consistency"] = "crash"
        state["notes"].append(
            f"the array is mounted at {mount_point}, a directory raidsnap does not freeze; "
            "the set is crash-consistent"
        )
    return state


def _look_at_discovery(
    state: State, discovery: dict[str, Any], instance: instances.ArrayInstance
) -> tuple[bool, instances.Layout | None, str]:
    """(still waiting, the layout discovery found, why it found none)."""
    result = commands.fetch(discovery["commandId"], state["instanceId"])
    if result.status == "pending":
        # Budgets count the time the workflow has waited, not the wall clock, so a retried
        # or redriven step does not shorten them.
        poll = Poll.of(discovery).waited()
        if not poll.spent:
            state["discovery"] = dict(discovery) | poll.as_dict()
            return True, None, ""
        commands.cancel(discovery["commandId"], state["instanceId"])
        return False, None, "discovery did not finish in time"
    if result.status == "failed":
        return False, None, f"discovery failed ({result.detail}: {result.stderr_tail(3)})"
    if result.result is None:
        return False, None, "discovery printed no report"
    layout = instances.members_from_discovery(state["array"], instance, result.result)
    return False, layout, "" if layout is not None else "discovery found no md array"
