"""The backup workflow's steps, as plain functions of the workflow state."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

from raidsnap import clients, snapshot_sets, tags
from raidsnap.aws import commands, instances, lock
from raidsnap.environment import BackupSettings, Documents, restore_lock_table, retention_for
from raidsnap.errors import (
    ArrayDegradedError,
    SnapshotFailedError,
    cause_message,
    public_name,
)
from raidsnap.models import BackupInput, parse_input, system_directory
from raidsnap.observability import logger
from raidsnap.plan import retention

State = dict[str, Any]

DISCOVERY_POLL_SECONDS = 3
COMMAND_POLL_SECONDS = 2
SNAPSHOT_POLL_MIN_SECONDS = 15
SNAPSHOT_POLL_MAX_SECONDS = 600
# The output names at most this many unrecorded snapshots (the count says how many there are).
UNRECORDED_LISTED = 50


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


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
    started = _parse_time(str(execution.get("startTime") or _iso(_now())))
    state: State = {
        "array": request.array,
        "consistency": request.consistency or "crash",
        "trigger": request.trigger,
        "retention": retention_for(request.array, settings.default_retention),
        "execution": {"arn": execution.get("id", ""), "startTime": _iso(started)},
        "setId": snapshot_sets.make_set_id(request.array, started, str(execution.get("id", ""))),
        "instanceId": instance.instance_id,
        "availabilityZone": instance.availability_zone,
        "notes": [],
    }
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
        "budgetSeconds": settings.discovery_timeout_seconds,
        "waitSeconds": DISCOVERY_POLL_SECONDS,
    }
    return state


def collect_members(state: State) -> State:
    """Members from the discover report, or from volume tags where discovery cannot tell."""
    instance = instances.describe_instance(state["instanceId"])
    discovery = state["discovery"]
    layout: instances.Layout | None = None
    note = str(discovery.get("reason", ""))
    if discovery["status"] == "pending":
        result = commands.fetch(discovery["commandId"], state["instanceId"])
        if result.status == "pending":
            # Budgets count the time the workflow has waited, not the wall clock, so a retried
            # or redriven step does not shorten them.
            budget = int(discovery["budgetSeconds"]) - int(discovery["waitSeconds"])
            if budget > 0:
                state["discovery"] = dict(discovery, budgetSeconds=budget)
                return state
            commands.cancel(discovery["commandId"], state["instanceId"])
            note = "discovery did not finish in time"
        elif result.status == "failed":
            note = f"discovery failed ({result.detail}: {result.stderr_tail(3)})"
        elif result.result is None:
            note = "discovery printed no report"
        else:
            layout = instances.members_from_discovery(state["array"], instance, result.result)
            if layout is None:
                note = "discovery found no md array"
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


def freeze_token(state: State) -> str:
    """This run's name for its freeze: the thaw document ends a freeze only when given the token
    it was made with, so a failed run never thaws a freeze someone else holds."""
    return hashlib.sha256(f"freeze:{state['execution']['arn']}".encode()).hexdigest()[:32]


def send_freeze(state: State, documents: Documents, settings: BackupSettings) -> dict[str, Any]:
    command = _start_command(
        documents.freeze,
        state,
        {
            "MountPoint": state["md"]["mountPoint"],
            "MaxFreezeSeconds": str(settings.max_freeze_seconds),
            "FreezeToken": freeze_token(state),
        },
        timeout=settings.max_freeze_seconds + 60,
        fail_on_error=True,
    )
    # The guard cannot thaw before the command was requested plus its bound: until then the
    # freeze is certain to hold (create_set compares the snapshots' start with this).
    command["frozenUntil"] = _iso(
        _parse_time(command["requestedAt"]) + timedelta(seconds=settings.max_freeze_seconds)
    )
    return command


def send_thaw(state: State, documents: Documents, settings: BackupSettings) -> dict[str, Any]:
    return _start_command(
        documents.thaw,
        state,
        {
            "MountPoint": state["md"]["mountPoint"],
            "MaxFreezeSeconds": str(settings.max_freeze_seconds),
            "FreezeToken": freeze_token(state),
        },
        timeout=120,
        fail_on_error=False,
    )


def _start_command(
    document: str, state: State, params: dict[str, str], timeout: int, fail_on_error: bool
) -> dict[str, Any]:
    command_id, requested = commands.send_timed(
        document, state["instanceId"], params, comment=f"raidsnap {state['setId']}", timeout=timeout
    )
    return {
        "commandId": command_id,
        "instanceId": state["instanceId"],
        "document": document,
        "status": "pending",
        "requestedAt": _iso(requested),
        "waitSeconds": COMMAND_POLL_SECONDS,
        "budgetSeconds": timeout,
        "failOnError": fail_on_error,
    }


def create_set(state: State) -> State:
    instance = instances.describe_instance(state["instanceId"])
    layout = instances.Layout(
        members=tuple(
            instances.Member(index=m["index"], volume_id=m["volumeId"], device=m.get("device"))
            for m in state["members"]
        ),
        source=state["discovery"]["source"],
        md=state.get("md") or {},
        raid_devices=state.get("memberCount"),
        missing_slots=tuple((state.get("degraded") or {}).get("missingSlots") or ()),
        degraded=bool(state.get("degraded")),
    )
    volumes = clients.ec2().describe_volumes(VolumeIds=[m.volume_id for m in layout.members])
    facts = {v["VolumeId"]: dict(v) for v in volumes["Volumes"]}
    freeze = state.get("freeze") or {}
    frozen_until = (
        _parse_time(freeze["frozenUntil"])
        if state["consistency"] == "fsfreeze" and freeze.get("frozenUntil")
        else None
    )
    taken = snapshot_sets.create_set(
        array=state["array"],
        set_id=state["setId"],
        execution_arn=state["execution"]["arn"],
        started=_parse_time(state["execution"]["startTime"]),
        instance=instance,
        layout=layout,
        consistency=state["consistency"],
        volume_facts=facts,
        frozen_until=frozen_until,
    )
    state["setId"] = taken.snapshot_set.set_id
    if taken.consistency != state["consistency"]:
        state["consistency"] = taken.consistency
    if taken.note:
        state["notes"].append(taken.note)
    state["snapshots"] = {
        "status": "pending",
        "waitSeconds": SNAPSHOT_POLL_MIN_SECONDS,
        "ids": [m.snapshot_id for m in taken.snapshot_set.by_index()],
        "polls": 0,
        "waitedSeconds": 0,
    }
    return state


def check_snapshots(state: State) -> State:
    """Completed, failed, or still going: and if going, how long to wait before looking again."""
    # The snapshots are taken (point in time) and the filesystem thawed by now.
    release_hold(state)
    current = snapshot_sets.get_set(state["array"], state["setId"])
    if current is None:
        raise SnapshotFailedError(f"the snapshots of set {state['setId']} no longer exist")
    failed = current.failed
    if failed:
        detail = "; ".join(
            f"member {m.index} ({m.volume_id}) snapshot {m.snapshot_id}: "
            f"{m.state_message or 'error'}"
            for m in failed
        )
        raise SnapshotFailedError(
            f"set {current.set_id} of {state['array']} failed: {detail}. The set will never "
            "be restored; retention removes it once newer sets exist"
        )
    snaps = dict(state["snapshots"])
    snaps["polls"] = int(snaps.get("polls", 0)) + 1
    snaps["waitedSeconds"] = int(snaps.get("waitedSeconds", 0)) + int(snaps["waitSeconds"])
    snaps["progress"] = min(m.progress for m in current.members)
    if current.members and all(m.state == "completed" for m in current.members):
        snaps["status"] = "completed"
    else:
        # Wait about half the time the slowest snapshot still seems to need, within bounds.
        elapsed = max(1.0, float(snaps["waitedSeconds"]))
        progress = max(1, snaps["progress"])
        remaining = elapsed * (100 - progress) / progress
        snaps["waitSeconds"] = int(
            min(SNAPSHOT_POLL_MAX_SECONDS, max(SNAPSHOT_POLL_MIN_SECONDS, remaining / 2))
        )
    state["snapshots"] = snaps
    return state


def apply_retention(state: State) -> State:
    """Keep the newest complete sets, delete the recorded snapshots of older ones, and leave
    every snapshot no set recorded alone (reported, never deleted)."""
    array = state["array"]
    found = snapshot_sets.listing(array)
    sets = found.sets
    protected = _sets_in_use(sets)
    current = next((s for s in sets if s.set_id == state["setId"]), None)
    now = current.start_time if current else max((s.start_time for s in sets), default=_now())
    decided = retention.plan(sets, int(state["retention"]), protected, now)
    deleted: list[str] = []
    refused: list[snapshot_sets.Refusal] = []
    for s in decided.delete:
        logger.info(
            "retention deletes set",
            extra={"set_id": s.set_id, "reason": decided.reasons[s.set_id]},
        )
        gone, kept = snapshot_sets.delete_set(s)
        deleted += gone
        refused += kept
    unrecorded = found.unrecorded_ids
    if unrecorded:
        logger.warning(
            "snapshots tagged with the array that no set of raidsnap recorded were left alone",
            extra={"array": array, "snapshots": unrecorded[:UNRECORDED_LISTED]},
        )
    for r in refused:
        logger.warning(
            "retention could not delete a snapshot",
            extra={"snapshot": r.snapshot_id, "code": r.code, "reason": r.message},
        )
    notes = list(state["notes"])
    if state["discovery"]["note"]:
        notes.append(state["discovery"]["note"])
    if refused:
        notes.append(
            f"retention could not delete {len(refused)} snapshots: "
            + "; ".join(f"{r.snapshot_id} ({r.code}: {r.message})" for r in refused[:5])
            + ". They stay until whatever holds them lets go (deregister the AMI, unlock the "
            "snapshot, or delete it from AWS Backup); the next backups try again"
        )
    state["output"] = {
        "array": array,
        "setId": state["setId"],
        "instanceId": state["instanceId"],
        "consistency": state["consistency"],
        "snapshotIds": [m.snapshot_id for m in (current.by_index() if current else [])],
        "memberVolumeIds": [m["volumeId"] for m in state["members"]],
        "discovery": state["discovery"]["source"],
        "notes": notes,
        "retention": {
            "keep": int(state["retention"]),
            "keptSets": [s.set_id for s in decided.keep],
            "deletedSets": [s.set_id for s in decided.delete],
            "deletedSnapshots": len(deleted),
            "notDeleted": [
                {"snapshotId": r.snapshot_id, "code": r.code, "message": r.message} for r in refused
            ],
            "unrecordedSnapshots": unrecorded[:UNRECORDED_LISTED],
            "unrecordedCount": len(unrecorded),
        },
    }
    return state


def fail_if_degraded(state: State) -> None:
    """A degraded array's backup ends in ArrayDegraded once its set is taken and retention has
    run, so that the run, and the operator, see it."""
    degraded = state.get("degraded")
    if not degraded:
        return
    missing = degraded.get("missingSlots") or []
    where = f"slots {missing} of {state.get('memberCount')} have" if missing else "md says it has"
    raise ArrayDegradedError(
        f"array {state['array']} on {state['instanceId']} is degraded: {where} no working member"
        + (f" ({', '.join(degraded['withoutSlot'])} hold no slot)" if degraded.get("withoutSlot")
           else "")
        + f". Set {state['setId']} was taken of the working members and marked degraded; it is "
        "never restored as latest, and retention does not count it. Replace or re-add the "
        "failed member and let md resync; the next backup after that is complete again"
    )  # fmt: skip


def _sets_in_use(sets: list[snapshot_sets.SnapshotSet]) -> set[str]:
    """Sets a restore is creating volumes from right now, or holds in the restore lock."""
    if not sets:
        return set()
    table = restore_lock_table()
    held = lock.sets_held(table, sets[0].array) if table else set()
    owner = {m.snapshot_id: s.set_id for s in sets for m in s.members}
    pages = (
        clients.ec2()
        .get_paginator("describe_volumes")
        .paginate(
            Filters=[
                {"Name": "status", "Values": ["creating"]},
                {"Name": "tag-key", "Values": [tags.RESTORE_EXECUTION]},
            ]
        )
    )
    return held | {
        owner[v["SnapshotId"]]
        for page in pages
        for v in page["Volumes"]
        if v.get("SnapshotId") in owner
    }


def explain_failure(state: State, documents: Documents, settings: BackupSettings) -> dict[str, str]:
    """Thaw if we froze, let go of the array, then name the failure for the run's Fail state."""
    error = state.get("error") or {}
    name = public_name(str(error.get("Error", "States.Runtime")))
    cause = cause_message(str(error.get("Cause", "")))
    freeze = state.get("freeze") or {}
    thaw = state.get("thaw") or {}
    # A freeze that failed or was cancelled may still have frozen the filesystem: thaw is
    # harmless on a thawed one, so thaw whenever a freeze was attempted.
    if freeze and thaw.get("status") != "success":
        try:
            send_thaw(state, documents, settings)
        except Exception:  # the guard thaws within its bound anyway
            logger.exception("thaw after failure could not be sent")
            cause += " (thaw could not be sent; the freeze guard thaws within its bound)"
    if state.get("array") and state.get("execution"):
        try:
            release_hold(state)
        except Exception:  # its lease ends the hold anyway
            logger.exception("the backup's hold on the array could not be released")
    return {"error": name, "cause": cause}
