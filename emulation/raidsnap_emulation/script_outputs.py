"""The last stdout line of each on-instance script: one schema per script, shared by the VM suite
(every real run's last line must validate) and the emulation's host model (every answer it gives
must validate). Error names are exactly those the script can emit (its ``fail <Name>`` calls; a
unit test keeps the two lists equal), so the emulation cannot invent an error the instance never
prints."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Slot = int | None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# ---------------------------------------------------------------------- failures

DiscoverError = Literal["InvalidInput", "ToolMissing"]
FreezeError = Literal[
    "AlreadyFrozen",
    "FreezeFailed",
    "FreezeWindowClosed",
    "GuardFailed",
    "HookFailed",
    "InvalidInput",
    "NotMounted",
    "ToolMissing",
]
ThawError = Literal["HookFailed", "InvalidInput", "NotOurFreeze", "ThawFailed", "ToolMissing"]
AssembleError = Literal[
    "AssembleFailed",
    "CopyAttached",
    "DuplicateMember",
    "InvalidInput",
    "MdDeviceBusy",
    "MemberCountMismatch",
    "MemberInUse",
    "MemberMissing",
    "MountConflict",
    "MountFailed",
    "MountPointBusy",
    "MountPointNotEmpty",
    "NoFilesystem",
    "NoMdSuperblock",
    "PersistFailed",
    "ToolMissing",
    "UuidMismatch",
]
ReleaseError = Literal[
    "FilesystemFrozen",
    "FilesystemInUse",
    "InvalidInput",
    "MdDeviceBusy",
    "MdDeviceHeld",
    "MemberDiskInUse",
    "MountPointMismatch",
    "MountedElsewhere",
    "ToolMissing",
    "UnmountFailed",
    "UuidMismatch",
]
PrewarmError = Literal["InvalidInput", "MemberMissing", "PrewarmFailed", "ToolMissing"]


class _Failure(_Model):
    ok: Literal[False]
    message: str


class DiscoverFailure(_Failure):
    error: DiscoverError


class FreezeFailure(_Failure):
    error: FreezeError


class ThawFailure(_Failure):
    error: ThawError


class AssembleFailure(_Failure):
    error: AssembleError


class ReleaseFailure(_Failure):
    error: ReleaseError


class PrewarmFailure(_Failure):
    error: PrewarmError


# ---------------------------------------------------------------------- discover


class DiscoveredMember(_Model):
    device: str
    serial: str | None
    volumeId: str | None
    # The RaidDevice number of an in-sync member; null for a spare, a faulty or rebuilding one.
    slot: Slot
    state: str | None


class DiscoveredFilesystem(_Model):
    type: str
    uuid: str | None
    label: str


class DiscoveredArray(_Model):
    device: str
    name: str | None
    uuid: str | None
    level: str | None
    chunkKib: int | None
    metadata: str | None
    state: str | None
    raidDevices: int | None
    # Devices missing from a redundant array (md's "degraded"); null for RAID 0.
    degraded: int | None
    members: list[DiscoveredMember]
    filesystem: DiscoveredFilesystem | None
    mountPoint: str | None
    matchesArrayName: bool


class DiscoverResult(_Model):
    ok: Literal[True]
    arrayName: str
    arrays: list[DiscoveredArray]


# ---------------------------------------------------------------------- freeze, thaw


class FreezeResult(_Model):
    ok: Literal[True]
    mountPoint: str
    # false: only the application hooks ran (Freeze=false)
    frozen: bool
    freezeSeconds: float
    guardPid: int
    maxFreezeSeconds: int
    thawDeadline: str
    systemdTimer: str | None
    token: str
    # the pre-snapshot hook: "none" (no hook given) or "ok" (a failed one fails the freeze)
    preSnapshot: Literal["none", "ok"] = "none"
    # epoch seconds (the instance's clock) taken just before fsfreeze -f (or, hooks only, once the
    # pre hook ended): the guard's thawDeadline is frozenAt + maxFreezeSeconds
    frozenAt: int


class ThawResult(_Model):
    ok: Literal[True]
    mountPoint: str
    mounted: bool
    wasFrozen: bool
    guardStopped: bool
    # the post-snapshot hook: "none" (none given, or already run by freeze or the guard) or "ok"
    postSnapshot: Literal["none", "ok"] = "none"


# ---------------------------------------------------------------------- assemble, release


class AssembledMember(_Model):
    volumeId: str
    device: str
    slot: Slot


class AssembledFilesystem(_Model):
    type: str
    uuid: str


class Persisted(_Model):
    mdadmConf: Literal["added", "replaced", "unchanged", "skipped"]
    mdadmConfPath: str | None
    initramfs: Literal["updated", "unchanged", "failed", "skipped-no-tool", "skipped"]
    fstab: Literal["added", "replaced", "unchanged", "skipped"]


class AssembleResult(_Model):
    ok: Literal[True]
    mdDevice: str
    # The array's own identity now (NewMdUuid), and the set's it was restored from.
    uuid: str
    setMdUuid: str
    level: str
    metadata: str
    members: list[AssembledMember]
    mountPoint: str
    filesystem: AssembledFilesystem
    readOnly: bool
    alreadyAssembled: bool
    stoppedArrays: list[str]
    persisted: Persisted
    changed: bool
    warnings: list[str]


class ReleasedMember(_Model):
    device: str
    volumeId: str | None
    slot: Slot
    state: str | None


class ReleaseResult(_Model):
    ok: Literal[True]
    mdDevice: str
    mountPoint: str
    unmount: Literal["not-mounted", "unmounted", "lazy"]
    stop: Literal["stopped", "already-stopped"]
    memberLost: bool
    members: list[ReleasedMember]
    changed: bool


# ---------------------------------------------------------------------- prewarm


class PrewarmedDevice(_Model):
    volumeId: str
    device: str
    size: int
    bytes: int


class PrewarmResult(_Model):
    # ok is false (and the exit status 1) when fewer bytes were read than the members hold.
    ok: bool
    method: Literal["fio", "dd"]
    bytes: int
    expectedBytes: int
    seconds: float
    mibPerSecond: float
    # How it read: fio's I/O engine (libaio, or psync where fio cannot load libaio; null for
    # dd), readers per member, bytes per read and reads in flight per reader.
    engine: Literal["libaio", "psync"] | None
    readersPerMember: int
    blockBytes: int
    queueDepth: int
    devices: list[PrewarmedDevice]


# ---------------------------------------------------------------------- per script

_FAILURES: dict[str, type[_Failure]] = {
    "discover": DiscoverFailure,
    "freeze": FreezeFailure,
    "thaw": ThawFailure,
    "assemble": AssembleFailure,
    "release": ReleaseFailure,
    "prewarm": PrewarmFailure,
}
_RESULTS: dict[str, type[_Model]] = {
    "discover": DiscoverResult,
    "freeze": FreezeResult,
    "thaw": ThawResult,
    "assemble": AssembleResult,
    "release": ReleaseResult,
    "prewarm": PrewarmResult,
}
SCRIPTS = tuple(_RESULTS)


def error_names(script: str) -> set[str]:
    """The error names the script can print, as the schema lists them."""
    annotation = _FAILURES[script].model_fields["error"].annotation
    return set(getattr(annotation, "__args__", ()))


def validate(script: str, line: str | dict[str, Any]) -> BaseModel:
    """Parse one script's last stdout line against its schema; raises pydantic's
    ValidationError naming the field that does not fit."""
    value = json.loads(line) if isinstance(line, str) else line
    # A failure line has "error" (prewarm's short read has ok false without one).
    if isinstance(value, dict) and "error" in value:
        return _FAILURES[script].model_validate(value)
    return _RESULTS[script].model_validate(value)


def last_line(stdout: str) -> str:
    lines = [x for x in stdout.strip().splitlines() if x.strip()]
    if not lines:
        raise ValueError("the script printed nothing on stdout")
    return lines[-1]
