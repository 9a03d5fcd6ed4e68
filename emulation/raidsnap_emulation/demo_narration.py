"""What `make demo` says of each step of the workflows, in a person's words, from what the
step's function returned (its result, as the state machine keeps it): a narrator per function,
or per function and step where one function serves several steps (the event names the step)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Narrator = Callable[[dict[str, Any]], str]

# What each on-instance document does while it runs (document names carry the stack's prefix).
DOCUMENT_WORK = {
    "discover": "reading the array's members and md state",
    "freeze": "freezing the filesystem",
    "thaw": "thawing the filesystem",
    "release": "unmounting and stopping the old array",
    "assemble": "assembling the array from the new volumes and mounting it",
    "prewarm": "still reading every block of the new volumes",
}


def _short(items: list[str], limit: int = 4) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def _duration(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60:02d} s"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


# ---------------------------------------------------------------------- backup


def _prepare(r: dict[str, Any]) -> str:
    d = r.get("discovery", {})
    how = "discovery started on the instance" if d.get("status") == "pending" else d.get("reason")
    return f"array instance {r['instanceId']} in {r['availabilityZone']}; {how}"


def _members(r: dict[str, Any]) -> str:
    d = r.get("discovery", {})
    if d.get("status") == "pending":
        return "discover document still running"
    md = r.get("md") or {}
    facts = (
        f"md {md.get('level', '?')} {md.get('uuid', '?')}, "
        f"{md.get('fsType', '?')} at {md.get('mountPoint', '?')}"
    )
    return f"{len(r['members'])} members from {d.get('source')}: {facts}"


def _snapshot(r: dict[str, Any]) -> str:
    return f"one CreateSnapshots call: set {r['setId']} = {_short(r['ids'])}"


def _check(r: dict[str, Any]) -> str:
    if "answered" in r:  # AwaitSnapshots' own look, or EBS's event through the rule
        said = f"EBS says createSnapshots {r['result']}; " if r.get("result") else ""
        if "setId" not in r:
            return "EBS's createSnapshots event: no backup waits on those snapshots"
        if r["answered"] is None:
            return said + "snapshots still pending: waiting for EBS's event"
        if r["answered"] == "failed":
            return said + "a snapshot is in error: the backup fails"
        return said + "every snapshot completed: the backup goes on"
    if r["status"] == "completed":
        return "every snapshot completed"
    return f"slowest snapshot at {r.get('progress', 0)}%; next look in {r['waitSeconds']} s"


def _retention(r: dict[str, Any]) -> str:
    ret = r["output"]["retention"]
    return (
        f"retention keeps the newest {ret['keep']}: {_plural(len(ret['keptSets']), 'set')} "
        f"kept, {len(ret['deletedSets'])} deleted ({ret['deletedSnapshots']} snapshots); "
        f"metrics BackupSucceeded, SnapshotsDeleted {ret['deletedSnapshots']}, "
        f"SnapshotsNotDeleted {len(ret['notDeleted'])}"
    )


def _keep_fsr(k: dict[str, Any]) -> str:
    zones = ", ".join(k.get("zones") or []) or "no zone"
    status = k["status"]
    if status == "off":
        return "no Fast Snapshot Restore policy for this array: no FSR to keep on the new set"
    if status == "pending":
        return f"waiting for the new set's FSR in {zones}; next look in {k['waitSeconds']} s"
    if status == "kept":
        return f"FSR kept on for the new set in {zones}; metric FastRestoreNotKept 0"
    notes = "; ".join((k.get("notes") or [])[-1:])
    value = 1 if status in ("skipped", "failed") else 0
    return f"FSR of the new set {status} ({notes or zones}); metric FastRestoreNotKept {value}"


def _failed(r: dict[str, Any]) -> str:
    return f"{r.get('error')}: {r.get('cause')}"


# ---------------------------------------------------------------------- copies


def _hand_over(r: dict[str, Any]) -> str:
    """The backup's copy step: each destination's copy run, as far as it got."""
    runs = r.get("runs") or {}
    told = []
    for where, run in sorted(runs.items()):
        ids = run.get("snapshotIds") or []
        done = f" ({_plural(len(ids), 'snapshot')} there)" if run.get("status") == "copied" else ""
        told.append(f"{where} {run.get('status')}{done}")
    return "copies of the set: " + ("; ".join(told) or "none handed over")


def _copy_prepare(r: dict[str, Any]) -> str:
    if r.get("alreadyCopied"):
        return f"in {r['region']}: set {r['setId']} is copied here already"
    return (
        f"in {r['region']}: set {r['setId']} of {r['array']} from {r['sourceRegion']}, "
        f"{_plural(len(r['members']), 'member')}, intent recorded in the manifest table here"
    )


def _copy_progress(r: dict[str, Any]) -> str:
    copies = r.get("copies") or {}
    if r.get("status") == "completed":
        return f"all {len(copies)} copies completed: {_short(sorted(copies.values()))}"
    waiting = r.get("waiting") or 0
    held = f", {waiting} waiting for room in the Region's 20 concurrent copies" if waiting else ""
    return f"CopySnapshot: {len(copies)} copies under way, {r.get('progress', 0)}% done{held}"


def _copy_finish(r: dict[str, Any]) -> str:
    source = r.get("source") or {}
    kept = len((r.get("retention") or {}).get("keptSets") or [])
    return (
        f"set {r['setId']} recorded complete in {r['region']}, copied from "
        f"{source.get('region')}; that Region's retention keeps {_plural(kept, 'set')}"
    )


# ---------------------------------------------------------------------- on-instance commands


def document_of(r: dict[str, Any]) -> tuple[str, str]:
    document = str(r.get("document") or "document")
    return document, document.rsplit("-", 1)[-1]


def _command(r: dict[str, Any]) -> str:
    document, _ = document_of(r)
    sent = f"sent {document} to {r.get('instanceId')}"
    if r.get("predictedSeconds") is not None:
        sent += f"; first look at its predicted end, in {_duration(r['waitSeconds'])}"
    return sent


def _poll(r: dict[str, Any]) -> str:
    document, kind = document_of(r)
    status = r.get("status")
    if status == "pending":
        work = DOCUMENT_WORK.get(kind, f"running on {r.get('instanceId')}")
        predicted = r.get("predictedSeconds")
        return f"{document}: {work}" + (
            f", predicted to take {_duration(predicted)}" if predicted is not None else ""
        )
    if status == "failed":
        tail = str(r.get("stderrTail") or "").strip().splitlines()[-1:]
        waited = r.get("waitedSeconds")
        after = f" after {_duration(waited)}" if waited is not None else ""
        return f"{document} failed{after}: {'; '.join(tail) or 'no output'}"
    return f"{document}: {_succeeded(kind, r.get('result') or {})}"


def _succeeded(kind: str, out: dict[str, Any]) -> str:
    if kind == "release":
        lost = "; a member was already gone" if out.get("memberLost") else ""
        how = "" if out.get("unmount") == "unmounted" else f" ({out.get('unmount')})"
        return f"{out.get('mdDevice')} unmounted{how}, {out.get('stop')}{lost}"
    if kind == "assemble":
        return (
            f"{out.get('mdDevice')} ({out.get('level')}) assembled from "
            f"{_plural(len(out.get('members') or []), 'member')}, its own new md UUID "
            f"{out.get('uuid')}"
        )
    if kind == "prewarm":
        gib = int(out.get("bytes") or 0) / 2**30
        return (
            f"read {gib:.0f} GiB in {_duration(float(out.get('seconds') or 0))} "
            f"({float(out.get('mibPerSecond') or 0):.0f} MiB/s, {out.get('method')}): "
            "every block is at full speed now"
        )
    if kind == "discover":
        arrays = out.get("arrays") or []
        found = "; ".join(
            f"{a.get('device')} {a.get('level')} {a.get('state')}, {a.get('raidDevices')} members"
            for a in arrays
        )
        return f"found {found}" if found else "found no array"
    return f"{kind} succeeded"


# ---------------------------------------------------------------------- restore


def _restore_prepare(r: dict[str, Any]) -> str:
    init = r["initialization"]
    chosen = "" if init["used"] == init["requested"] else f" (chose {init['used']})"
    predicted = ""
    if init.get("mountedSeconds") is not None:
        predicted = (
            f"; predicted: mounted in {_duration(init['mountedSeconds'])}, full speed in "
            f"{_duration(init['fullPerformanceSeconds'])}"
        )
    return (
        f"set {r['setId']} ({len(r['members'])} members) onto {r['targetInstanceId']} in "
        f"{r['availabilityZone']}; {r['mode']} mode, initialization {init['requested']}"
        f"{chosen}{predicted}; lock taken"
    )


def _restore_fsr(f: dict[str, Any]) -> str:
    if f["status"] == "ready":
        return "Fast Snapshot Restore usable for every snapshot: create the volumes"
    if f["status"] == "pending" and not f.get("seen"):
        return f"enabled FSR for {len(f['ours'])} snapshots in the target's AZ only"
    if f["status"] == "pending":
        states = sorted({v[0] for v in f["seen"].values()})
        return f"FSR {', '.join(states)}; next look in {f['waitSeconds']} s"
    return f"FSR: {f['status']} ({'; '.join(f.get('notes', [])[-1:])})"


def _restore_create(v: dict[str, Any]) -> str:
    ids = v["ids"]
    return f"one step asked for {len(ids)} volumes (a ClientToken per member): {_short(ids)}"


def _restore_check(v: dict[str, Any]) -> str:
    done = "; FSR disabled again" if v.get("fsrDisabled") else ""
    return f"{len(v['ids'])} volumes {v['status']} (one DescribeVolumes call){done}"


def _restore_old(old: dict[str, Any]) -> str:
    if old["status"] == "detached":
        kept = _short(old["volumeIds"])
        return f"old members detached and kept, tagged raidsnap:replaced-by: {kept}"
    return f"detaching old members {_short(old['volumeIds'])} to keep them"


def _restore_attach(a: dict[str, Any]) -> str:
    devices = ", ".join(a.get("devices") or [])
    if a["status"] == "attached":
        return f"{_plural(len(a.get('devices') or []), 'volume')} attached as {devices}"
    return f"attaching the new volumes as {devices}"


def _restore_finish(r: dict[str, Any]) -> str:
    out = r["output"]
    prewarm = out.get("prewarm") or {}
    warned = len(out.get("warnings") or [])
    how = f"; prewarm {prewarm['status']}" if prewarm.get("status") else ""
    how += f"; {_plural(warned, 'warning')}" if warned else ""
    return f"restore ends: {out['mdDevice']} at {out['mountPoint']}{how}; lock released"


def _restore_report(r: dict[str, Any]) -> str:
    told = r.get("told")
    if told == "success":
        return "told the waiting recovery: the array is mounted (the prewarm goes on here)"
    if told == "failure":
        return "told the waiting recovery: this restore failed, its cleanup done"
    return "no recovery was waiting to be told (its task had ended)"


NARRATORS: dict[str, Narrator] = {
    "restore_prepare": _restore_prepare,
    "restore_fsr": _restore_fsr,
    "restore_create_volumes": _restore_create,
    "restore_check_volumes": _restore_check,
    "restore_detach_old": _restore_old,
    "restore_attach": _restore_attach,
    "restore_command": _command,
    "restore_finish": _restore_finish,
    "restore_report": _restore_report,
    "backup_prepare": _prepare,
    "backup_members": _members,
    "backup_snapshot": _snapshot,
    "backup_check": _check,
    "backup_retention": _retention,
    "backup_keep_fsr": _keep_fsr,
    "command_poll": _poll,
    "backup_failed": _failed,
    "restore_failed": _failed,
    "backup_copies": _hand_over,
    "copy_prepare": _copy_prepare,
    "copy_progress": _copy_progress,
    "copy_finish": _copy_finish,
    "copy_failed": _failed,
}


# ---------------------------------------------------------------------- recovery and drill


def _assess(r: dict[str, Any]) -> str:
    evidence = "; ".join(r.get("evidence") or []) or "none yet"
    if r.get("status") == "pending":
        return f"evidence: {evidence}; asking the instance itself with the discover document"
    if r.get("status") == "act":
        return f"a member is impaired ({evidence}): restore"
    return f"no member impaired ({evidence}): nothing replaced"


def _target(r: dict[str, Any]) -> str:
    if r.get("status") != "ready":
        return f"target {r.get('instanceId')} not ready yet (running, SSM agent online?)"
    moved = f"; the array's tag moved off {r['retired']}" if r.get("retired") else ""
    return f"target {r.get('instanceId')} is running, its SSM agent online{moved}"


def _start_restore(r: dict[str, Any]) -> str:
    name = str(r.get("executionArn", "")).rsplit(":", 1)[-1]
    return f"started restore {name}; waiting for it to report the array mounted"


def _heartbeat(r: dict[str, Any]) -> str:
    if r.get("status") == "open":
        return f"heartbeat for the launch's lifecycle action; next in {_duration(r['waitSeconds'])}"
    return "no launch lifecycle action is open: nothing to keep alive"


def _recovered(r: dict[str, Any]) -> str:
    out = r.get("output") or {}
    if "error" in r:
        return f"recovery failed ({r['error']}): metric RecoveryFailed, notification"
    if out.get("action") != "restored":
        return f"no restore ({out.get('action')}): the array was not touched; notification sent"
    chosen = out.get("set") or {}
    age = chosen.get("ageMinutes")
    taken = f", taken {age:.0f} min before the {out.get('trigger')}" if age is not None else ""
    where = (out.get("restore") or {}).get("mountPoint")
    return (
        f"recovery succeeded: set {chosen.get('setId')}{taken}, mounted at {where}; "
        f"metric RecoverySucceeded, notification {out.get('notification', 'sent')}"
    )


def _drill_report(r: dict[str, Any]) -> str:
    if r.get("passed"):
        return "drill passed: metric DrillSucceeded, notification sent"
    return f"drill failed ({r.get('error')}): metric DrillFailed, notification sent"


def _teardown_volumes(r: dict[str, Any]) -> str:
    left = r.get("left") or []
    return f"deleted {len(r.get('deleted', []))} drill volumes" + (
        f", {len(left)} still detaching" if left else "; nothing else touched"
    )


def _drill_check(r: dict[str, Any]) -> str:
    return (
        f"the copy is the array: md UUID {r.get('mdUuid')}, {r.get('filesystem')}, "
        f"{r.get('members')} members, read-only"
    )


STEPS: dict[tuple[str, str], Narrator] = {
    ("recovery_step", "assess"): _assess,
    ("recovery_step", "target"): _target,
    ("recovery_step", "restore"): _start_restore,
    ("recovery_step", "heartbeat"): _heartbeat,
    ("recovery_step", "succeeded"): _recovered,
    ("recovery_step", "failed"): _recovered,
    ("recovery_step", "none"): _recovered,
    ("drill_verify", "discover"): lambda r: "discover document on the drill instance",
    ("drill_verify", "check"): _drill_check,
    ("drill_teardown", "release"): lambda r: "release document: unmount and stop the drill copy",
    ("drill_teardown", "volumes"): _teardown_volumes,
    ("drill_prepare", ""): lambda r: (
        f"drill of {r.get('array')} onto {r.get('targetInstanceId')}, restore nested"
    ),
    ("drill_report", ""): _drill_report,
    ("recovery_start", ""): lambda r: (
        f"trigger: one recovery execution, named for the event: {r.get('name', '')}"
    ),
}
