"""Restore drills: prove a set restores, without touching the array it came from.

A drill restores a set read-only onto a separate drill instance (the restore workflow, nested),
checks that what came up there is that array, then removes exactly what its restore created,
and reports the outcome as a metric and a notification. It never touches the source array, its
instance, its volumes or its snapshots: the restore runs in attach mode on another instance,
and teardown deletes only volumes tagged with the drill's own restore execution.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from raidsnap import tags
from raidsnap.aws import commands, instances, lock, notifications, snapshot_sets, snapshots, volumes
from raidsnap.environment import DrillSettings
from raidsnap.errors import (
    DrillTeardownFailedError,
    DrillVerificationFailedError,
    InvalidInputError,
)
from raidsnap.models import Poll, parse_drill_input
from raidsnap.observability import count, for_array, logger
from raidsnap.plan.causes import child_failure
from raidsnap.plan.cleanup import attached_to
from raidsnap.plan.volumes import run_nonce

State = dict[str, Any]

COMMAND_POLL_SECONDS = 2
DISCOVER_TIMEOUT_SECONDS = 120
RELEASE_TIMEOUT_SECONDS = 300
TEARDOWN_POLL_SECONDS = 5
# Teardown asks for a normal detach first, and forces it after this many looks (the copy was
# mounted read-only and released first, so nothing is lost by forcing).
TEARDOWN_FORCE_AFTER = 6
TEARDOWN_MAX_LOOKS = 120
# Every restore a drill starts is named drill-<hash>: the drill's IAM policy lets it delete
# only volumes whose raidsnap:restore-execution names such a restore.
RESTORE_NAME_PREFIX = "drill-"


def prepare(event: dict[str, Any], settings: DrillSettings) -> State:
    """Validate the drill request and the drill instance; build the nested restore's input."""
    request = parse_drill_input(event.get("input"))
    execution = event.get("execution") or {}
    target = request.targetInstanceId
    state, target_tags = instances.instance_facts(target)
    if state == "unknown":
        raise InvalidInputError("targetInstanceId", f"instance {target} does not exist")
    logger.append_keys(array=request.array, target=target)
    held = target_tags.get(tags.ARRAY)
    if held == request.array:
        raise InvalidInputError(
            "targetInstanceId",
            f"{target} holds {request.array} itself; a drill restores a copy onto a separate "
            f"instance tagged {tags.ARRAY}=<another name>, such as {request.array}-drill",
        )
    if not held:
        raise InvalidInputError(
            "targetInstanceId",
            f"{target} is not tagged {tags.ARRAY}; tag the drill instance "
            f"{tags.ARRAY}={request.array}-drill (raidsnap runs its documents only on instances "
            "so tagged)",
        )
    execution_id = str(execution.get("id", ""))
    name = RESTORE_NAME_PREFIX + hashlib.sha256(execution_id.encode()).hexdigest()[:40]
    machine = settings.restore_state_machine_arn
    restore_arn = machine.replace(":stateMachine:", ":execution:", 1) + ":" + name
    return {
        "array": request.array,
        "setId": request.setId,
        "targetInstanceId": target,
        "mountPoint": request.mountPoint,
        "mdDevice": request.mdDevice,
        "trigger": request.trigger,
        "execution": {"id": execution_id, "startTime": execution.get("startTime")},
        "restoreName": name,
        "restoreExecutionArn": restore_arn,
        "restoreInput": {
            "array": request.array,
            "setId": request.setId,
            "targetInstanceId": target,
            "mode": "attach",
            "readOnly": True,
            "mountPoint": request.mountPoint,
            "mdDevice": request.mdDevice,
            "initialization": request.initialization,
        },
    }


# ---------------------------------------------------------------------- verify


def verify_step(event: dict[str, Any], discover_document: str) -> dict[str, Any]:
    """The Verify task: send discover, or check what it found."""
    steps = {"discover": lambda state: send_discover(state, discover_document), "check": verify}
    return _one_of(event, "verify", steps)


def teardown_step(event: dict[str, Any], release_document: str) -> dict[str, Any]:
    """The Teardown task: release the copy, or remove the drill's volumes."""
    steps = {"release": lambda state: send_release(state, release_document)}
    return _one_of(event, "teardown", steps | {"volumes": remove_volumes})


def _one_of(
    event: dict[str, Any], task: str, steps: Mapping[str, Callable[[State], dict[str, Any]]]
) -> dict[str, Any]:
    """Run the step the task's input names (``step``) on its ``state``."""
    step = str(event["step"])
    if step not in steps:
        raise ValueError(f"unknown drill {task} step {step!r}")
    return steps[step](event["state"])


def send_discover(state: State, discover_document: str) -> dict[str, Any]:
    command_id = commands.send(
        discover_document,
        state["targetInstanceId"],
        {"ArrayName": state["array"]},
        comment=f"raidsnap drill {state['array']}",
        timeout=DISCOVER_TIMEOUT_SECONDS,
    )
    return _command(state, command_id, discover_document, DISCOVER_TIMEOUT_SECONDS, True)


def _command(
    state: State, command_id: str, document: str, timeout: int, fail_on_error: bool
) -> dict[str, Any]:
    poll = Poll(COMMAND_POLL_SECONDS, timeout)
    target = state["targetInstanceId"]
    return commands.record(command_id, target, document, poll, fail_on_error=fail_on_error)


def verify(state: State) -> dict[str, Any]:
    """Is the array on the drill instance the set's array, assembled from exactly the restored
    volumes, mounted read-only at the drill mount point?"""
    restore = state.get("restore") or {}
    out = restore.get("output") or {}
    given = restore.get("input") or {}
    problems = []
    if out.get("targetInstanceId") != state["targetInstanceId"]:
        problems.append(f"restored onto {out.get('targetInstanceId')}, not the drill instance")
    if out.get("mountPoint") != state["mountPoint"] or out.get("mdDevice") != state["mdDevice"]:
        problems.append(
            f"restored as {out.get('mdDevice')} at {out.get('mountPoint')}, not "
            f"{state['mdDevice']} at {state['mountPoint']}"
        )
    if given.get("readOnly") is not True:
        problems.append("the restore was not asked to mount read-only")
    volume_ids = list(out.get("volumeIds") or [])
    set_id = str(out.get("setId", ""))
    found = snapshot_sets.get_set(state["array"], set_id) if set_id else None
    recorded = dict(found.tag_values) if found else {}
    md_uuid = recorded.get(tags.MD_UUID) or str(out.get("mdUuid", ""))
    fs_type = recorded.get(tags.FS_TYPE)
    seen = ((state.get("discover") or {}).get("result") or {}).get("arrays") or []
    md = next((a for a in seen if a.get("device") == state["mdDevice"]), None)
    if md is None:
        problems.append(f"discovery on {state['targetInstanceId']} finds no {state['mdDevice']}")
    else:
        if md.get("uuid") != md_uuid:
            problems.append(f"md UUID is {md.get('uuid')}, the set records {md_uuid}")
        members = [
            m.get("volumeId") for m in sorted(md.get("members") or [], key=lambda m: m["slot"])
        ]
        if members != volume_ids:
            problems.append(f"members are {members}, the restore created {volume_ids}")
        fs = md.get("filesystem") or {}
        if fs_type and fs.get("type") != fs_type:
            problems.append(f"filesystem is {fs.get('type')}, the set records {fs_type}")
        if md.get("mountPoint") != state["mountPoint"]:
            problems.append(f"mounted at {md.get('mountPoint')}, not {state['mountPoint']}")
    if problems:
        raise DrillVerificationFailedError(
            f"set {set_id} of {state['array']} restored, but the copy on "
            f"{state['targetInstanceId']} is not right: " + "; ".join(problems)
        )
    return {
        "setId": set_id,
        "mdUuid": md_uuid,
        "filesystem": fs_type,
        "members": len(volume_ids),
        "readOnly": True,
    }


# ---------------------------------------------------------------------- teardown


def send_release(state: State, release_document: str) -> dict[str, Any]:
    """Release the copy on the drill instance whenever a volume of the drill's restore is
    attached there, whatever became of the restore: one preempted after assembly left the copy
    assembled and mounted, and every later drill on the host would find its md device busy."""
    arn = (state.get("restore") or {}).get("executionArn") or state["restoreExecutionArn"]
    run = restore_run(arn)
    target = state["targetInstanceId"]
    views = volumes.created_by(arn, run) if run else {}
    attached = sorted(vid for vid, view in views.items() if attached_to(view, target))
    if not attached:
        return {"status": "skipped", "reason": f"no volume of {arn} is attached to {target}"}
    md_uuid = str(((state.get("restore") or {}).get("output") or {}).get("mdUuid") or "")
    command_id = commands.send(
        release_document,
        target,
        {
            "MdDevice": state["mdDevice"],
            "MountPoint": state["mountPoint"],
            # The snapshot's record, so that release refuses whatever other array the drill's
            # md device might hold.
            "MdUuid": md_uuid or snapshots.md_uuid_of_volume(attached[0]),
        },
        comment=f"raidsnap drill teardown {state['array']}",
        timeout=RELEASE_TIMEOUT_SECONDS,
    )
    # A release that fails still lets teardown detach (and after a while force) the volumes.
    return _command(state, command_id, release_document, RELEASE_TIMEOUT_SECONDS, False)


def remove_volumes(state: State) -> dict[str, Any]:
    """Detach and delete the volumes the drill's restore created, and nothing else; called in
    a loop until none is left (or the looks run out)."""
    t = dict(state.get("teardown") or {})
    arn = (state.get("restore") or {}).get("executionArn") or state["restoreExecutionArn"]
    if "run" not in t:
        t["run"] = restore_run(arn)
    t.setdefault("looks", 0)
    t["looks"] += 1
    run = str(t["run"])
    views = volumes.created_by(arn, run) if run else {}
    pending = volumes.remove_created(views, arn, run, t, force_after=TEARDOWN_FORCE_AFTER)
    t["left"] = pending
    if pending and t["looks"] < TEARDOWN_MAX_LOOKS:
        t["status"] = "pending"
        t["waitSeconds"] = TEARDOWN_POLL_SECONDS
    else:
        t["status"] = "done"
    return t


def restore_run(restore_arn: str) -> str:
    """The run nonce of the drill's restore (its ARN and start time, as the restore derived it),
    or "" when that restore never started. Drill names, and with them their restores' names,
    may come again after 90 days: the ARN alone could name an earlier run."""
    started = lock.describe(restore_arn)[1]
    return run_nonce(restore_arn, started) if started is not None else ""


# ---------------------------------------------------------------------- report


def report(state: State, topic: str) -> dict[str, Any]:
    """Decide the outcome, tell the operator, and shape the output or the named error."""
    array = str(state.get("array") or (state.get("input") or {}).get("array") or "unknown")
    target = state.get("targetInstanceId") or (state.get("input") or {}).get("targetInstanceId")
    teardown = state.get("teardown") or {}
    left = list(teardown.get("left") or [])
    deleted = list(teardown.get("deleted") or [])
    passed = not state.get("error") and not left
    error = cause = ""
    if state.get("error"):
        error, cause = child_failure(state["error"])
    if left:
        removal = (
            f"teardown could not remove volumes {left} (tagged {tags.RESTORE_EXECUTION}="
            f"{state.get('restoreExecutionArn')}): delete them by hand"
        )
        if not error:
            error, cause = public_name_of(DrillTeardownFailedError), removal
        else:
            cause += f" [{removal}]"
    restored = ((state.get("restore") or {}).get("output")) or {}
    verification = state.get("verification") or {}
    if passed:
        subject = f"raidsnap drill of {array}: passed"
        message = (
            f"The restore drill of {array} passed. Set {restored.get('setId')} was restored "
            f"read-only onto {target} as {restored.get('mdDevice')} at "
            f"{restored.get('mountPoint')} from {len(restored.get('volumeIds') or [])} volumes; "
            f"md UUID {verification.get('mdUuid')} and filesystem "
            f"{verification.get('filesystem') or 'unrecorded'} match the set. Teardown deleted "
            f"the {len(deleted)} volumes the drill created. The array itself was not touched."
        )
    else:
        subject = f"raidsnap drill of {array}: FAILED ({error})"
        message = (
            f"The restore drill of {array} onto {target} failed with {error}: {cause}. "
            f"Teardown deleted {len(deleted)} volumes the drill created"
            + (f" and left {left}" if left else ", nothing is left behind")
            + f". The array itself was not touched. Run: {state.get('execution', {}).get('id')}"
        )
    notifications.publish(topic, subject, message)
    logger.info("drill reported", extra={"array": array, "passed": passed})
    for_array(array)
    count("DrillSucceeded" if passed else "DrillFailed")
    result: dict[str, Any] = {"passed": passed, "array": array, "message": message}
    if passed:
        result["output"] = {
            "array": array,
            "setId": restored.get("setId"),
            "targetInstanceId": target,
            "restoreExecutionArn": (state.get("restore") or {}).get("executionArn"),
            "verification": verification,
            "deletedVolumeIds": deleted,
            "message": message,
        }
    else:
        result["error"], result["cause"] = error, cause
    return result


def public_name_of(error: type[Exception]) -> str:
    return error.__name__.removesuffix("Error")
