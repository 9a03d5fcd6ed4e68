"""Restore, last step: release the lock and shape the output, with what became of the prewarm."""

from __future__ import annotations

import re
from typing import Any

from botocore.exceptions import ClientError

from raidsnap import tags
from raidsnap.aws import commands, error_code, lock
from raidsnap.environment import RestoreSettings
from raidsnap.errors import cause_message, public_name
from raidsnap.observability import count, for_array

State = dict[str, Any]


def finish(state: State, settings: RestoreSettings) -> State:
    """Release the lock and shape the output. The array is assembled and mounted by now: a
    prewarm that failed, could not start or could not be followed is a warning, never a
    failure of the run."""
    lock.release(settings.lock_table, state["array"], state["execution"]["id"])
    for_array(state["array"])
    count("RestoreSucceeded")
    notes = list(state["notes"])
    warnings: list[str] = []
    if state.get("tagTarget"):
        notes.append(
            f"tagged {state['targetInstanceId']} {tags.ARRAY}={state['array']}: backups of "
            f"{state['array']} now follow the restored array"
        )
    assembled = (state.get("assemble") or {}).get("result") or {}
    prewarm_out = _prewarm_outcome(state, warnings)
    init = state["initialization"]
    f = state.get("fsr") or {}
    if init["requested"] == "fsr" and init["used"] == "fsr":
        notes.append(
            f"FSR enabled for {len(f.get('ours', []))} snapshots in {state['availabilityZone']} "
            "and disabled again once the volumes existed"
        )
    taken = state.get("setTakenAt")
    if taken:
        notes.append(
            f"the array holds the data of set {state['setId']}, taken {taken}; writes made "
            "to the array after that time are not in it"
        )
    state["output"] = {
        "array": state["array"],
        "setId": state["setId"],
        "setTakenAt": taken,
        "volumeIds": state["volumes"]["ids"],
        "devices": (state.get("attach") or {}).get("devices", []),
        "mdDevice": assembled.get("mdDevice") or state["mdDevice"],
        "mountPoint": assembled.get("mountPoint") or state["mountPoint"],
        "mdUuid": state["mdUuid"],
        "targetInstanceId": state["targetInstanceId"],
        "availabilityZone": state["availabilityZone"],
        "mode": state["mode"],
        "initialization": init["used"],
        "requestedInitialization": init["requested"],
        "fastRestored": state["volumes"].get("fastRestored", []),
        "memberInitialization": _member_initialization(state),
        "replacedVolumeIds": (state.get("old") or {}).get("volumeIds", []),
        "prewarm": prewarm_out,
        "warnings": warnings,
        "notes": notes,
    }
    return state


_SLOW_READS = (
    "the array is assembled, mounted and usable, but blocks not yet read come from S3 slowly "
    "on first access; run the prewarm document when convenient"
)


def _prewarm_outcome(state: State, warnings: list[str]) -> dict[str, Any] | None:
    """What became of the prewarm, and how far it got, in words for the output's warnings."""
    prewarm = state.get("prewarm") or {}
    error = state.get("prewarmError") or {}
    if not prewarm and not error:
        return None
    ids = ",".join(state["volumes"]["ids"])
    if not prewarm:
        reason = cause_message(str(error.get("Cause", ""))) or str(error.get("Error", ""))
        warnings.append(
            f"the prewarm was not started ({public_name(str(error.get('Error', '')))}: "
            f"{reason}); {_SLOW_READS} (VolumeIds {ids})"
        )
        return {"status": "not-started", "reason": reason}
    if error:
        # The prewarm was started but could not be followed: one more look, best effort.
        command_id, instance_id = prewarm["commandId"], prewarm["instanceId"]
        try:
            looked = commands.fetch(command_id, instance_id)
        except ClientError as err:
            why = f"{error.get('Error')}, then {error_code(err)}"
            warnings.append(
                f"could not follow the prewarm (command {command_id} on {instance_id}: {why}); "
                f"it may have finished or may still be reading; {_SLOW_READS} if it did not"
            )
            return {"status": "unknown", "commandId": command_id}
        if looked.status == "pending":
            warnings.append(
                f"the prewarm (command {command_id} on {instance_id}) is still reading: "
                f"{_progress(looked.stderr) or 'progress unknown'}; the array is mounted and "
                "usable meanwhile"
            )
            return {"status": "running", "commandId": command_id}
        prewarm = dict(prewarm, status=looked.status, result=looked.result)
        prewarm["stderrTail"] = looked.stderr_tail()
    if prewarm.get("status") == "success":
        return {"status": "success", "result": prewarm.get("result")}
    tail = str(prewarm.get("stderrTail", ""))
    got = _progress(tail)
    warnings.append(
        f"the prewarm failed{' after reading ' + got if got else ''}: "
        f"{tail.splitlines()[-1] if tail else 'no output'}; {_SLOW_READS} (VolumeIds {ids})"
    )
    return {"status": "failed", "progress": got, "stderrTail": tail}


def _progress(stderr: str) -> str:
    """The prewarm's last progress line ("progress: nvme1n1 512/8192MiB ..."), summed."""
    lines = [ln for ln in stderr.splitlines() if "progress:" in ln]
    if not lines:
        return ""
    pairs = re.findall(r"(\d+)/(\d+)MiB", lines[-1])
    done, total = sum(int(a) for a, _ in pairs), sum(int(b) for _, b in pairs)
    return f"{done} of {total} MiB" if total else ""


def _member_initialization(state: State) -> list[str]:
    """How each member's volume was initialized, in member order: fsr for a volume EC2 fast
    restored, prewarm for one read on the instance, else the run's initialization."""
    init = state["initialization"]
    ids = state["volumes"]["ids"]
    fast = state["volumes"].get("fastRestored") or [False] * len(ids)
    prewarmed = set(init.get("prewarmVolumeIds") or [])
    out = []
    for vid, fast_restored in zip(ids, fast, strict=True):
        if vid in prewarmed:
            out.append("prewarm")
        elif init["used"] == "fsr" and fast_restored:
            out.append("fsr")
        else:
            out.append(str(init["used"]))
    return out
