"""Backup, middle steps: freeze and thaw the filesystem (fsfreeze consistency), take the set's
snapshots at once, and follow them until they complete."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

from raidsnap.aws import commands, instances, snapshot_sets, snapshots, volumes
from raidsnap.environment import BackupSettings, Documents
from raidsnap.errors import SnapshotFailedError
from raidsnap.models import Poll
from raidsnap.observability import count, for_array
from raidsnap.workflows.backup import times
from raidsnap.workflows.backup.prepare import release_hold

State = dict[str, Any]

COMMAND_POLL_SECONDS = 2
SNAPSHOT_POLL_MIN_SECONDS = 15
SNAPSHOT_POLL_MAX_SECONDS = 600


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
    command["frozenUntil"] = times.iso(
        times.parse_time(command["requestedAt"]) + timedelta(seconds=settings.max_freeze_seconds)
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
    poll = Poll(COMMAND_POLL_SECONDS, timeout)
    started = commands.record(
        command_id, state["instanceId"], document, poll, fail_on_error=fail_on_error
    )
    return started | {"requestedAt": times.iso(requested)}


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
    facts = volumes.raw([m.volume_id for m in layout.members])
    freeze = state.get("freeze") or {}
    frozen_until = (
        times.parse_time(freeze["frozenUntil"])
        if state["consistency"] == "fsfreeze" and freeze.get("frozenUntil")
        else None
    )
    taken = snapshots.create_set(
        array=state["array"],
        set_id=state["setId"],
        execution_arn=state["execution"]["arn"],
        started=times.parse_time(state["execution"]["startTime"]),
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
    for_array(state["array"])
    count("SnapshotSetsStarted")
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
