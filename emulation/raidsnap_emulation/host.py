"""The instance side of the emulation: md superblocks on EBS volumes, and answers to raidsnap's
SSM documents as the real scripts would give them.

A volume restored from a snapshot carries the superblock its source volume had, so an array
backed up and restored elsewhere assembles by the same md UUID, and a foreign or missing
member is refused just as mdadm would refuse it.

The responders read their parameters as the scripts do: from the SSM_<Name> variables the agent
exported (``CommandContext.environment``, rendered by raidsnap_emulation.ssm_agent from the
deployed document), never from the SendCommand call itself. A document whose parameters are not
declared ENV_VAR, or an agent too old to export them, gets the script's own refusal
(``InvalidInput: VolumeIds has an invalid value ...``). Every answer, including one set with
``fail_next``, is checked against the script's output schema (raidsnap_emulation.script_outputs).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from moto.ec2.models import ec2_backends
from moto.ec2.models.instance_types import INSTANCE_TYPES

from raidsnap.models import system_directory
from raidsnap.plan.restore_time import BURST_SECONDS
from raidsnap_emulation import script_outputs
from raidsnap_emulation.double import AwsDouble, CommandContext, CommandOutcome

ACCOUNT = "123456789012"
# freeze.sh: a later freeze of one run ends this long before the first one, and is
# refused with less than MIN_WINDOW left (lib/freeze_guard.sh group_gap_seconds, freeze.sh
# min_window_seconds).
GROUP_GAP = timedelta(seconds=2)
MIN_WINDOW = timedelta(seconds=10)


@dataclass(frozen=True)
class Superblock:
    md_uuid: str
    slot: int
    raid_devices: int
    level: str
    chunk_kib: int
    name: str


@dataclass(frozen=True)
class Filesystem:
    type: str
    uuid: str
    label: str = ""


@dataclass
class MdArray:
    device: str
    md_uuid: str
    members: list[str]  # volume ids by slot
    mount_point: str | None
    read_only: bool = False
    failed: bool = False
    # A redundant array (RAID 1/10/5/6) runs on without these: marked faulty by md (still listed,
    # no slot), or removed from the array (not listed at all). Spares hold no slot either.
    faulty: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    spares: list[str] = field(default_factory=list)


@dataclass
class InstanceState:
    arrays: dict[str, MdArray] = field(default_factory=dict)
    frozen: set[str] = field(default_factory=set)
    guards: dict[str, int] = field(default_factory=dict)  # mount point -> guard pid
    # Mount point -> the token its freeze guard keeps (freeze.sh's state file). A mount point
    # frozen without a guard is frozen by someone else (another tool).
    freeze_tokens: dict[str, str] = field(default_factory=dict)
    # Mount point -> the post-snapshot hook owed once its pre hook ran (freeze.sh's marker).
    hooks_owed: dict[str, str] = field(default_factory=dict)
    # Mount point -> when its freeze guard thaws it (the deadline in freeze.sh's state file).
    deadlines: dict[str, datetime] = field(default_factory=dict)
    # Freeze token -> the deadline and mount point of the run's first freeze (freeze.sh's group
    # record).
    group_deadlines: dict[str, tuple[datetime, str]] = field(default_factory=dict)
    # Volumes EC2 shows attached whose NVMe device the instance no longer has (the controller
    # dropped off): no block device, no serial to read.
    dropped: set[str] = field(default_factory=set)
    mdadm_conf: dict[str, str] = field(default_factory=dict)  # md uuid -> ARRAY line
    fstab: dict[str, str] = field(default_factory=dict)  # mount point -> line
    prewarmed: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)


def _md_uuid() -> str:
    raw = uuid.uuid4().hex
    return ":".join(raw[i : i + 8] for i in range(0, 32, 8))


def _serial(volume_id: str) -> str:
    return volume_id.replace("-", "")


class Hosts:
    """Every instance's md state, and the responders for the stack's documents."""

    # A prewarm reads at the gp3 maximum the volume allows, 1000 MiB/s by default.
    prewarm_mib_per_second = 1000.0
    # Or, for a benchmark, however long it says: (instance id, {volume id: bytes}) -> seconds.
    prewarm_seconds_for: Callable[[str, dict[str, int]], float] | None = None

    # How long fsfreeze -f takes (it flushes the filesystem's dirty data first).
    fsfreeze_seconds = 0.004

    def __init__(self, double: AwsDouble, document_names: dict[str, str], region: str) -> None:
        self.double = double
        self.region = region
        self.superblocks: dict[str, Superblock] = {}
        self.filesystems: dict[str, Filesystem] = {}  # md uuid -> filesystem on the array
        self.instances: dict[str, InstanceState] = {}
        self._lock = threading.RLock()
        responders = {
            "discover": self._discover,
            "freeze": self._freeze,
            "thaw": self._thaw,
            "assemble": self._assemble,
            "release": self._release,
            "prewarm": self._prewarm,
        }
        for kind, name in document_names.items():
            if kind in responders:
                double.on_command(name, self._checked(kind, responders[kind]))
        self.failures: dict[str, CommandOutcome] = {}

    # ------------------------------------------------------------------ moto's view

    def _backends(self) -> list[Any]:
        """moto's EC2 of every Region and account the emulation deployed a stack to, its own
        first: an instance, volume or snapshot id names one resource wherever it is."""
        places = [(ACCOUNT, self.region), *self.double.places]
        return [ec2_backends[a][r] for a, r in dict.fromkeys(places)]

    def _backend(self, **found: str) -> Any:
        """The backend that has the instance (instance_id=) or volume (volume_id=)."""
        for backend in self._backends():
            try:
                if "instance_id" in found:
                    backend.get_instance(found["instance_id"])
                else:
                    backend.get_volume(found["volume_id"])
            except Exception:  # noqa: S112 - moto raises its own not-found errors
                continue
            return backend
        return self._backends()[0]

    def attached(self, instance_id: str) -> dict[str, str]:
        """Device name -> volume id, as EC2 has them attached now."""
        instance = self._backend(instance_id=instance_id).get_instance(instance_id)
        return {dev: bd.volume_id for dev, bd in instance.block_device_mapping.items()}

    def nvme_devices(self, instance_id: str) -> dict[str, str]:
        """Volume id -> /dev/nvmeXn1, numbered in attachment order as Nitro does; a volume whose
        device dropped off the instance has none."""
        order = list(self.attached(instance_id).values())
        dropped = self.state(instance_id).dropped
        return {vid: f"/dev/nvme{i}n1" for i, vid in enumerate(order) if vid not in dropped}

    def _instance_read_seconds(self, instance_id: str, total_bytes: int) -> float:
        """The least time the instance takes to read ``total_bytes`` from EBS: at its maximum
        EBS throughput for up to 30 minutes, then at its baseline (DescribeInstanceTypes
        EbsInfo.EbsOptimizedInfo, MB/s, as moto describes the type; EC2 User Guide, "Amazon
        EBS-optimized instance types": the maximum lasts 30 minutes at least once every 24
        hours). 0 for a type described without it: then only the volumes set the pace."""
        instance = self._backend(instance_id=instance_id).get_instance(instance_id)
        kind = str(getattr(instance, "instance_type", ""))
        info = (INSTANCE_TYPES.get(kind, {}).get("EbsInfo") or {}).get("EbsOptimizedInfo") or {}
        baseline = float(info.get("BaselineThroughputInMBps") or 0) * 1e6
        maximum = float(info.get("MaximumThroughputInMBps") or 0) * 1e6
        if not baseline or not maximum:
            return 0.0
        burst = maximum * BURST_SECONDS
        if total_bytes <= burst:
            return total_bytes / maximum
        return BURST_SECONDS + (total_bytes - burst) / baseline

    def volume_size_bytes(self, volume_id: str) -> int:
        return int(self._backend(volume_id=volume_id).get_volume(volume_id).size) * 1024**3

    def superblock(self, volume_id: str) -> Superblock | None:
        """The superblock a volume carries: its own, or the one its snapshot's source had."""
        seen: set[str] = set()
        current = volume_id
        while current not in self.superblocks and current not in seen:
            seen.add(current)
            # A copy of a snapshot in another Region keeps its source's volume (moto's copy).
            backend = self._backend(volume_id=current)
            try:
                snapshot_id = backend.get_volume(current).snapshot_id
            except Exception:
                return None
            if not snapshot_id:
                return None
            try:
                current = backend.get_snapshot(snapshot_id).volume.id
            except Exception:
                return None
        return self.superblocks.get(current)

    def state(self, instance_id: str) -> InstanceState:
        with self._lock:
            return self.instances.setdefault(instance_id, InstanceState())

    # ------------------------------------------------------------------ building a world

    def build_array(
        self,
        instance_id: str,
        volume_ids: list[str],
        *,
        name: str = "md0",
        level: str = "raid0",
        chunk_kib: int = 512,
        fs_type: str = "xfs",
        mount_point: str = "/data",
        md_device: str = "/dev/md0",
    ) -> str:
        """mdadm --create and mkfs, as the operator did long before raidsnap came along."""
        md_uuid = _md_uuid()
        for slot, vid in enumerate(volume_ids):
            self.superblocks[vid] = Superblock(
                md_uuid, slot, len(volume_ids), level, chunk_kib, f"ip-10-0-0-1:{name}"
            )
        self.filesystems[md_uuid] = Filesystem(fs_type, str(uuid.uuid4()), "")
        self.state(instance_id).arrays[md_device] = MdArray(
            md_device, md_uuid, list(volume_ids), mount_point
        )
        return md_uuid

    def degrade(self, instance_id: str, volume_id: str, *, removed: bool = False) -> None:
        """md fails a member of a redundant array, which runs on degraded: the member is listed
        as faulty, or (``removed``, after mdadm --remove) no longer listed at all."""
        for array in self.state(instance_id).arrays.values():
            if volume_id in array.members:
                (array.removed if removed else array.faulty).add(volume_id)

    def repair(self, instance_id: str, volume_id: str) -> None:
        """The member is back in its slot and resynced (mdadm --add, recovery done)."""
        for array in self.state(instance_id).arrays.values():
            array.faulty.discard(volume_id)
            array.removed.discard(volume_id)

    def add_spare(self, instance_id: str, volume_id: str, md_device: str = "/dev/md0") -> None:
        """An attached volume added to the array as a hot spare (no slot until it is used)."""
        self.state(instance_id).arrays[md_device].spares.append(volume_id)

    def freeze_by_another(self, instance_id: str, mount_point: str) -> None:
        """Another tool (or a backup still running) holds a freeze of the mount point."""
        self.state(instance_id).frozen.add(mount_point)

    def lose_member(self, instance_id: str, volume_id: str) -> None:
        """A member volume is gone: the array fails (RAID 0 has no redundancy)."""
        for array in self.state(instance_id).arrays.values():
            if volume_id in array.members:
                array.failed = True

    def drop_device(self, instance_id: str, volume_id: str) -> None:
        """The member's NVMe device drops off the instance while EC2 still shows the volume
        attached (an EBS or Nitro fault): the array fails, and the instance can no longer read
        the device's serial, so nothing on it can say which volume that member was."""
        self.state(instance_id).dropped.add(volume_id)
        self.lose_member(instance_id, volume_id)

    def udev_assembled(self, instance_id: str, volume_ids: list[str], md_device: str) -> None:
        """udev's incremental assembly built an array of these volumes on its own (md127 and
        the like), unmounted, as it does when members with a superblock appear."""
        blocks = [self.superblock(v) for v in volume_ids]
        md_uuid = blocks[0].md_uuid if blocks and blocks[0] else _md_uuid()
        by_slot = sorted(volume_ids, key=lambda v: (self.superblock(v) or blocks[0]).slot)  # type: ignore[union-attr]
        self.state(instance_id).arrays[md_device] = MdArray(md_device, md_uuid, by_slot, None)

    def fail_next(self, kind: str, outcome: CommandOutcome) -> None:
        """Make the next command of this document kind end with ``outcome``."""
        self.failures[kind] = outcome

    def _take_failure(self, kind: str) -> CommandOutcome | None:
        with self._lock:
            return self.failures.pop(kind, None)

    # ------------------------------------------------------------------ reading parameters

    def _checked(
        self, kind: str, responder: Callable[[CommandContext], CommandOutcome]
    ) -> Callable[[CommandContext], CommandOutcome]:
        """The responder, after any outcome set with fail_next, with its answer held to the
        script's output schema: the emulation never says what the script cannot say."""

        def answer(ctx: CommandContext) -> CommandOutcome:
            outcome = self._take_failure(kind) or responder(ctx)
            if outcome.stdout.strip():
                line = script_outputs.last_line(outcome.stdout)
                try:
                    script_outputs.validate(kind, line)
                except ValueError as err:
                    raise ScriptOutputError(
                        f"the emulated {kind} printed what {kind}.sh never prints: {line}\n{err}"
                    ) from None
            return outcome

        return answer

    @staticmethod
    def _read(ctx: CommandContext, kind: str) -> dict[str, str]:
        """The script's parameters from what the agent exported, checked in the script's order
        with its messages; raises _Refusal where the script would refuse."""
        values: dict[str, str] = {}
        for name, check, unset in SCRIPT_INPUTS[kind]:
            raw = ctx.environment.get(f"SSM_{name}")
            # ${SSM_X:-} takes unset and empty alike as ""; ${SSM_X-default} only unset.
            value = (raw or "") if unset is None else (unset if raw is None else raw)
            if check == "mount":
                _require_mount_point(name, value)
            elif check == "not-system":
                # As lib/system_directory.sh: the array's own mount point may be a system
                # directory itself, never a system tree.
                found = system_directory(value, own=values.get("OwnMountPoint") == "true")
                if found:
                    raise _Refusal(
                        "InvalidInput",
                        f"{name} {value} is or lies under the system directory {found}; a "
                        "filesystem is never mounted over a system directory, whose files it "
                        "would hide or replace",
                    )
            elif check.startswith("if-set:"):
                if value:
                    _require_match(name, value, check.removeprefix("if-set:"))
            else:
                _require_match(name, value, check)
            values[name] = value
        return values

    @staticmethod
    def _ok(result: dict[str, Any], progress: str = "", duration: float = 1.0) -> CommandOutcome:
        stdout = json.dumps(result)
        stderr = f"raidsnap: {progress}\n" if progress else ""
        return CommandOutcome(
            status="Success", stdout=stdout, stderr=stderr, duration_seconds=duration
        )

    @staticmethod
    def _refuse(error: str, message: str, duration: float = 1.0) -> CommandOutcome:
        """As the scripts' fail(): the reason on stderr, the JSON line last on stdout, exit 2
        for bad input and 1 otherwise."""
        return CommandOutcome(
            status="Failed",
            stdout=json.dumps({"ok": False, "error": error, "message": message}),
            stderr=f"raidsnap: {error}: {message}\n",
            exit_code=2 if error == "InvalidInput" else 1,
            duration_seconds=duration,
        )

    def _answer(
        self, ctx: CommandContext, kind: str, act: Callable[[dict[str, str]], CommandOutcome]
    ) -> CommandOutcome:
        try:
            return act(self._read(ctx, kind))
        except _Refusal as refusal:
            return self._refuse(refusal.error, refusal.message)

    # ------------------------------------------------------------------ responders

    def _discover(self, ctx: CommandContext) -> CommandOutcome:
        return self._answer(ctx, "discover", lambda p: self._do_discover(ctx, p))

    def _do_discover(self, ctx: CommandContext, p: dict[str, str]) -> CommandOutcome:
        state = self.state(ctx.instance_id)
        devices = self.nvme_devices(ctx.instance_id)
        array_name = p["ArrayName"]
        arrays = []
        for md in state.arrays.values():
            if md.failed:
                continue
            sb = self.superblocks.get(md.members[0]) or self.superblock(md.members[0])
            fs = self.filesystems.get(md.md_uuid)
            name = sb.name if sb else None
            arrays.append(
                {
                    "device": md.device,
                    "name": name,
                    "uuid": md.md_uuid,
                    "level": sb.level if sb else None,
                    "chunkKib": sb.chunk_kib if sb else None,
                    "metadata": "1.2",
                    "state": "clean",
                    "raidDevices": len(md.members),
                    # md has no degraded count for RAID 0 (it cannot run degraded).
                    "degraded": None
                    if sb is None or sb.level == "raid0"
                    else len(md.faulty | md.removed),
                    "members": [
                        {
                            "device": devices.get(vid, ""),
                            "serial": _serial(vid),
                            "volumeId": vid,
                            "slot": None if vid in md.faulty else slot,
                            "state": "faulty" if vid in md.faulty else "in_sync",
                        }
                        for slot, vid in enumerate(md.members)
                        if vid not in md.removed
                    ]
                    + [
                        {
                            "device": devices.get(vid, ""),
                            "serial": _serial(vid),
                            "volumeId": vid,
                            "slot": None,
                            "state": "spare",
                        }
                        for vid in md.spares
                    ],
                    "filesystem": (
                        {"type": fs.type, "uuid": fs.uuid, "label": fs.label} if fs else None
                    ),
                    "mountPoint": md.mount_point,
                    "matchesArrayName": bool(
                        name and (name == array_name or name.endswith(":" + array_name))
                    ),
                }
            )
        return self._ok({"ok": True, "arrayName": array_name, "arrays": arrays}, duration=2.0)

    def _mounted(self, instance_id: str, mount: str) -> MdArray | None:
        for md in self.state(instance_id).arrays.values():
            if md.mount_point == mount:
                return md
        return None

    def _freeze(self, ctx: CommandContext) -> CommandOutcome:
        return self._answer(ctx, "freeze", lambda p: self._do_freeze(ctx, p))

    def _do_freeze(self, ctx: CommandContext, p: dict[str, str]) -> CommandOutcome:
        mount, max_seconds = p["MountPoint"], int(p["MaxFreezeSeconds"])
        token = p["FreezeToken"] or uuid.uuid4().hex
        pre, freeze = p["PreSnapshot"], p["Freeze"] == "true"
        state = self.state(ctx.instance_id)
        if self._mounted(ctx.instance_id, mount) is None:
            return self._refuse("NotMounted", f"{mount} is not a mount point")
        # A guard whose deadline came has fired by now (freeze.sh's guard_pid finds none).
        self._fire_guards(state, ctx.now)
        if mount in state.guards:
            return self._refuse(
                "AlreadyFrozen",
                f"{mount} already has a freeze guard (pid {state.guards[mount]}); run thaw first",
            )
        if mount in state.frozen:
            # freeze.sh: the guard starts, fsfreeze -f on a filesystem another tool froze fails
            # with EBUSY, and the guard is stopped again.
            return self._refuse(
                "AlreadyFrozen",
                f"{mount} is already frozen by someone else: fsfreeze: {mount}: freeze failed: "
                "Device or resource busy",
            )
        # freeze.sh: the run's record of its first freeze (lib/freeze_guard.sh, group_deadline;
        # kept after that freeze ended, ignored an hour past it) caps this one's deadline
        # GROUP_GAP before it; the time left is counted in whole seconds (`date +%s`).
        # A record of this very mount point (the same freeze again) starts the sequence anew.
        first, first_mount = state.group_deadlines.get(token, (None, None))
        if first is not None and (first_mount == mount or ctx.now >= first + timedelta(hours=1)):
            first = None
        cap = first - GROUP_GAP if first is not None else None
        if cap is not None and cap - ctx.now.replace(microsecond=0) < MIN_WINDOW:
            left = int((cap - ctx.now.replace(microsecond=0)).total_seconds())
            return self._refuse(
                "FreezeWindowClosed",
                f"{mount} was not frozen: the first freeze of the same run, on another mount "
                f"point, is thawed by its guard at {first:%Y-%m-%dT%H:%M:%SZ}, and every later "
                f"freeze ends {GROUP_GAP.seconds}s before it, which leaves {left}s (at least "
                f"{MIN_WINDOW.seconds}s needed); raise MaxFreezeSeconds or take fewer arrays "
                "together",
            )
        if cap is not None and freeze and ctx.now + timedelta(seconds=self.fsfreeze_seconds) >= cap:
            # freeze.sh: fsfreeze -f ended past the cap: thawed at once.
            return self._refuse(
                "FreezeWindowClosed",
                f"{mount} was thawed at once: fsfreeze -f ended past the end of the run's first "
                f"freeze (its guard at {first:%Y-%m-%dT%H:%M:%SZ}); raise MaxFreezeSeconds or "
                "take fewer arrays together",
                duration=self.fsfreeze_seconds + 0.5,
            )
        pid = 4000 + len(state.log)
        if pre:
            # freeze.sh runs the pre hook before fsfreeze and owes the post hook from then on.
            state.log.append(f"pre-snapshot {pre}")
            state.hooks_owed[mount] = p["PostSnapshot"]
        if freeze:
            state.log.append(f"freeze {mount}")
            state.frozen.add(mount)
        state.guards[mount] = pid
        state.freeze_tokens[mount] = token
        # freeze.sh counts from `date +%s`, whole seconds rounded down.
        deadline = ctx.now.replace(microsecond=0) + timedelta(seconds=max_seconds)
        if cap is not None:
            deadline = min(deadline, cap)
        state.deadlines[mount] = deadline
        if first is None:
            state.group_deadlines[token] = (deadline, mount)
        unit = "raidsnap-thaw-" + hashlib.sha256(mount.encode()).hexdigest()[:16]
        return self._ok(
            {
                "ok": True,
                "mountPoint": mount,
                "frozen": freeze,
                "freezeSeconds": 0.004 if freeze else 0,
                "guardPid": pid,
                "maxFreezeSeconds": max_seconds,
                "thawDeadline": deadline.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "systemdTimer": unit,
                "token": token,
                "preSnapshot": "ok" if pre else "none",
                "frozenAt": int(ctx.now.timestamp()),
            },
            progress=f"froze {mount}; guard {pid} thaws it by {deadline:%H:%M:%S}",
            duration=self.fsfreeze_seconds + 0.5 if freeze else 0.5,
        )

    @staticmethod
    def _fire_guards(state: InstanceState, now: datetime) -> None:
        """Each freeze guard whose deadline has come thaws its mount point and runs the post hook
        owed (lib/freeze_guard.sh, raidsnap_guard), in deadline order."""
        for mount, deadline in sorted(state.deadlines.items(), key=lambda item: item[1]):
            if deadline <= now:
                Hosts._guard_fires(state, mount)

    @staticmethod
    def _guard_fires(state: InstanceState, mount: str) -> None:
        if mount in state.frozen:
            state.frozen.discard(mount)
            state.log.append(f"guard thawed {mount}")
        state.guards.pop(mount, None)
        state.freeze_tokens.pop(mount, None)
        state.deadlines.pop(mount, None)
        owed = state.hooks_owed.pop(mount, "")
        if owed:
            state.log.append(f"post-snapshot {owed} (guard)")

    def _thaw(self, ctx: CommandContext) -> CommandOutcome:
        return self._answer(ctx, "thaw", lambda p: self._do_thaw(ctx, p))

    def _do_thaw(self, ctx: CommandContext, p: dict[str, str]) -> CommandOutcome:
        mount, token = p["MountPoint"], p["FreezeToken"]
        state = self.state(ctx.instance_id)
        self._fire_guards(state, ctx.now)
        mounted = self._mounted(ctx.instance_id, mount) is not None
        recorded = state.freeze_tokens.get(mount)
        if recorded is not None and recorded != token:
            # thaw.sh: a guard that keeps another token guards someone else's freeze.
            return self._refuse(
                "NotOurFreeze",
                f"{mount} is frozen under another token (another backup or tool holds it); "
                "not thawed",
            )
        if recorded is None:
            # thaw.sh: no raidsnap guard, so nothing of ours to thaw; a filesystem frozen
            # without one is another tool's, and stays as it is.
            return self._ok(
                {
                    "ok": True,
                    "mountPoint": mount,
                    "mounted": mounted,
                    "wasFrozen": False,
                    "guardStopped": False,
                    "postSnapshot": "none",
                },
                progress=f"no raidsnap freeze guard for {mount}: nothing of ours to thaw",
            )
        was_frozen = mount in state.frozen
        if was_frozen:
            state.log.append(f"thaw {mount}")
        state.frozen.discard(mount)
        guard = state.guards.pop(mount, None)
        del state.freeze_tokens[mount]
        state.deadlines.pop(mount, None)
        owed = state.hooks_owed.pop(mount, "")
        waited = 0.0
        if owed:
            # thaw.sh: the post hook waits for the run's other freezes to end, each by its own
            # thaw or at the latest its guard's deadline (lib/freeze_guard.sh, wait_group).
            waited = self._wait_group(state, token, ctx.now)
        if owed and p["PostSnapshot"]:
            state.log.append(f"post-snapshot {p['PostSnapshot']}")
        return self._ok(
            {
                "ok": True,
                "mountPoint": mount,
                "mounted": mounted,
                "wasFrozen": was_frozen,
                "guardStopped": guard is not None,
                "postSnapshot": "ok" if owed and p["PostSnapshot"] else "none",
            },
            progress=f"thawed {mount} (was frozen: {str(was_frozen).lower()})",
            duration=1.0 + waited,
        )

    @staticmethod
    def _wait_group(state: InstanceState, token: str, now: datetime) -> float:
        """The seconds a post hook waits for the freezes of its run on other mount points: each
        ends at its guard's deadline, which fires while the thaw waits."""
        group = {m: d for m, d in state.deadlines.items() if state.freeze_tokens.get(m) == token}
        if not group:
            return 0.0
        for mount in sorted(group, key=group.__getitem__):
            Hosts._guard_fires(state, mount)
        return max(0.0, (max(group.values()) - now).total_seconds() + 1)

    def _assemble(self, ctx: CommandContext) -> CommandOutcome:
        return self._answer(ctx, "assemble", lambda p: self._do_assemble(ctx, p))

    def _do_assemble(self, ctx: CommandContext, p: dict[str, str]) -> CommandOutcome:
        wanted = p["VolumeIds"].split(",")
        md_uuid, md_device, mount = p["MdUuid"], p["MdDevice"], p["MountPoint"]
        # assemble.sh gives the array this identity while assembling (mdadm --update=uuid);
        # a hand run without one gets a generated one.
        new_uuid = p.get("NewMdUuid") or _md_uuid()
        ids = {md_uuid, new_uuid}
        read_only, persist = p["ReadOnly"] == "true", p["Persist"] == "true"
        dup = sorted(v for v in set(wanted) if wanted.count(v) > 1)
        if dup:
            return self._refuse("InvalidInput", f"VolumeIds lists {dup[0]} twice")
        devices = self.nvme_devices(ctx.instance_id)
        missing = [v for v in wanted if v not in devices]
        if missing:
            return self._refuse(
                "MemberMissing",
                f"no block device for {' '.join(missing)} after 120s (is it attached to this "
                "instance?)",
            )
        blocks = {v: self.superblock(v) for v in wanted}
        for vid, sb in blocks.items():
            if sb is None:
                return self._refuse(
                    "NoMdSuperblock", f"{vid} ({devices[vid]}) carries no md superblock"
                )
            if sb.md_uuid not in ids:
                return self._refuse(
                    "UuidMismatch",
                    f"{vid} ({devices[vid]}) belongs to md array {sb.md_uuid}, not {md_uuid} "
                    f"(nor {new_uuid}, the identity this restore gives)",
                )
        supers = [sb for sb in blocks.values() if sb is not None]
        if len({sb.md_uuid for sb in supers}) > 1:
            return self._refuse(
                "UuidMismatch",
                f"some members already carry the new identity {new_uuid} and some still carry "
                f"{md_uuid}: an earlier assemble stopped while it wrote the superblocks. Nothing "
                "was changed",
            )
        if supers[0].raid_devices != len(wanted):
            return self._refuse(
                "MemberCountMismatch",
                f"the superblocks say the array has {supers[0].raid_devices} devices, "
                f"{len(wanted)} volume ids were given",
            )
        slots = [sb.slot for sb in supers]
        if len(set(slots)) != len(slots):
            return self._refuse(
                "DuplicateMember", "two volumes carry the same member: copies of one disk?"
            )
        # Disks of the set's own array keep its identity and cannot join this one; only disks
        # that already carry the new identity are refused (assemble.sh step 2b).
        copies = [
            f"{dev} ({vid})"
            for vid, dev in devices.items()
            if vid not in wanted
            and new_uuid != md_uuid
            and (sb := self.superblock(vid))
            and sb.md_uuid == new_uuid
        ]
        if copies:
            return self._refuse(
                "CopyAttached",
                f"other disks already carry md UUID {new_uuid}, the identity this restore gives: "
                f"{' '.join(copies)}. Two sets of disks under one identity could be mixed at a "
                "boot; detach those (their volumes are kept) and assemble again. Nothing was "
                "changed",
            )
        old_members = [
            f"{dev} ({vid})"
            for vid, dev in devices.items()
            if vid not in wanted
            and new_uuid != md_uuid
            and (sb := self.superblock(vid))
            and sb.md_uuid == md_uuid
        ]
        warnings = (
            [
                f"disks of the set's own array (md UUID {md_uuid}) are attached: "
                f"{' '.join(old_members)}; they keep that identity and cannot join the restored "
                f"array ({new_uuid})"
            ]
            if old_members
            else []
        )
        state = self.state(ctx.instance_id)
        by_slot = sorted(wanted, key=lambda v: blocks[v].slot if blocks[v] else 0)  # type: ignore[union-attr]
        current = state.arrays.get(md_device)
        if current and current.md_uuid not in ids and not current.failed:
            return self._refuse(
                "MdDeviceBusy",
                f"{md_device} is already array {current.md_uuid}; choose another MdDevice or "
                "release it first",
            )
        stale = current is not None and current.md_uuid in ids and not current.failed
        if stale and current and current.members != by_slot and current.mount_point:
            have = " ".join(devices.get(v, v) for v in current.members)
            return self._refuse(
                "MdDeviceBusy",
                f"{md_device} is mounted but holds other devices ({have}) than requested",
            )
        fs = self.filesystems.get(md_uuid) or self.filesystems.get(new_uuid)
        if fs is None:
            return self._refuse(
                "NoFilesystem", f"{md_device} holds no filesystem that blkid recognises"
            )
        other = self._mounted(ctx.instance_id, mount)
        if other is not None and other.device != md_device and not other.failed:
            return self._refuse("MountPointBusy", f"{mount} already has another filesystem mounted")
        already = bool(current and current.md_uuid == new_uuid and current.members == by_slot)
        changed = not (already and current and current.mount_point == mount)
        changed = changed or bool(current and current.read_only != read_only)
        for vid in by_slot:
            sb = blocks[vid]
            if sb is not None and sb.md_uuid != new_uuid:
                self.superblocks[vid] = replace(sb, md_uuid=new_uuid)
        self.filesystems[new_uuid] = fs
        state.arrays[md_device] = MdArray(md_device, new_uuid, by_slot, mount, read_only)
        persisted: dict[str, Any] = {
            "mdadmConf": "skipped",
            "mdadmConfPath": None,
            "initramfs": "skipped",
            "fstab": "skipped",
        }
        if persist:
            line = f"ARRAY {md_device} metadata=1.2 UUID={new_uuid}"
            had = state.mdadm_conf.get(new_uuid) or (
                state.mdadm_conf.pop(md_uuid, None) if md_uuid != new_uuid else None
            )
            conf = "unchanged" if had == line else ("replaced" if had else "added")
            state.mdadm_conf[new_uuid] = line
            opts = "ro,nosuid,nodev,noexec" if read_only else "rw,nosuid,nodev"
            opts += ",nofail,x-systemd.device-timeout=30s"
            passno = 2 if fs.type.startswith("ext") else 0
            tab_line = f"/dev/disk/by-id/md-uuid-{new_uuid} {mount} {fs.type} {opts} 0 {passno}"
            had_tab = state.fstab.get(mount)
            tab = "unchanged" if had_tab == tab_line else ("replaced" if had_tab else "added")
            state.fstab[mount] = tab_line
            persisted = {
                "mdadmConf": conf,
                "mdadmConfPath": "/etc/mdadm/mdadm.conf",
                "initramfs": "unchanged" if conf == "unchanged" else "updated",
                "fstab": tab,
            }
            changed = changed or conf != "unchanged" or tab != "unchanged"
        sb0 = supers[0]
        return self._ok(
            {
                "ok": True,
                "mdDevice": md_device,
                "uuid": new_uuid,
                "setMdUuid": md_uuid,
                "level": sb0.level,
                "metadata": "1.2",
                "members": [
                    {"volumeId": v, "device": devices[v], "slot": i} for i, v in enumerate(by_slot)
                ],
                "mountPoint": mount,
                "filesystem": {"type": fs.type, "uuid": fs.uuid},
                "readOnly": read_only,
                "alreadyAssembled": already,
                "stoppedArrays": [],
                "persisted": persisted,
                "changed": changed,
                "warnings": warnings,
            },
            progress=f"assembled {md_device} from {len(by_slot)} members",
            duration=5.0,
        )

    def _release(self, ctx: CommandContext) -> CommandOutcome:
        return self._answer(ctx, "release", lambda p: self._do_release(ctx, p))

    def _do_release(self, ctx: CommandContext, p: dict[str, str]) -> CommandOutcome:
        md_device, mount, md_uuid = p["MdDevice"], p["MountPoint"], p["MdUuid"]
        state = self.state(ctx.instance_id)
        current = state.arrays.get(md_device)
        if md_uuid and current is not None and current.md_uuid != md_uuid:
            return self._refuse(
                "UuidMismatch",
                f"{md_device} is array {current.md_uuid}, not {md_uuid}; nothing was changed",
            )
        holder = self._mounted(ctx.instance_id, mount)
        if holder is not None and holder.device != md_device:
            return self._refuse(
                "MountPointMismatch",
                f"{mount} holds {holder.device}, not {md_device}; nothing was changed",
            )
        released = state.arrays.pop(md_device, None)
        devices = self.nvme_devices(ctx.instance_id)
        lost = bool(released and released.failed)
        # As release.sh prints them: one object per member the md device had; a member whose
        # device is gone has no serial to read, so no volume id (device_serial prints nothing).
        members: list[dict[str, Any]] = [
            {
                "device": devices.get(v, f"/dev/nvme{90 + i}n1"),
                "volumeId": v if v in devices else None,
                "slot": i,
                "state": "faulty" if v not in devices else "in_sync",
            }
            for i, v in enumerate(released.members if released else [])
        ]
        # With MdUuid: other disks whose superblock carries that UUID and that no array holds
        # (old members of an earlier copy), as release.sh finds them with mdadm --examine.
        wanted = md_uuid or (released.md_uuid if released else "")
        held = {v for md in state.arrays.values() for v in md.members}
        for vid, dev in devices.items():
            sb = self.superblock(vid)
            in_md = released is not None and vid in released.members
            if wanted and sb and sb.md_uuid == wanted and not in_md and vid not in held:
                members.append(
                    {"device": dev, "volumeId": vid, "slot": None, "state": "not-assembled"}
                )
        if released is None or released.mount_point != mount:
            unmount = "not-mounted"
        else:
            unmount = "lazy" if lost else "unmounted"
        return self._ok(
            {
                "ok": True,
                "mdDevice": md_device,
                "mountPoint": mount,
                "unmount": unmount,
                "stop": "stopped" if released else "already-stopped",
                "memberLost": lost,
                "members": members,
                "changed": released is not None,
            },
            duration=2.0,
        )

    def _prewarm(self, ctx: CommandContext) -> CommandOutcome:
        return self._answer(ctx, "prewarm", lambda p: self._do_prewarm(ctx, p))

    def _do_prewarm(self, ctx: CommandContext, p: dict[str, str]) -> CommandOutcome:
        volume_ids = p["VolumeIds"].split(",")
        devices = self.nvme_devices(ctx.instance_id)
        for vid in volume_ids:
            if vid not in devices:
                return self._refuse("MemberMissing", f"no block device for {vid}")
        sizes = {v: self.volume_size_bytes(v) for v in volume_ids}
        total = sum(sizes.values())
        # Members are read in parallel: the slowest (largest) sets the pace; or as a benchmark
        # says reads go (prewarm_seconds_for: the instance and the members' sizes in bytes).
        seconds = (
            self.prewarm_seconds_for(ctx.instance_id, sizes)
            if self.prewarm_seconds_for is not None
            else max(
                max(sizes.values(), default=0) / (self.prewarm_mib_per_second * 1024**2),
                self._instance_read_seconds(ctx.instance_id, total),
            )
        )
        self.state(ctx.instance_id).prewarmed.extend(volume_ids)
        method = "fio" if p["Method"] == "auto" else p["Method"]
        return self._ok(
            {
                "ok": True,
                "method": method,
                "bytes": total,
                "expectedBytes": total,
                "seconds": round(seconds, 3),
                "mibPerSecond": round(total / 1024**2 / seconds, 1) if seconds else 0.0,
                # As the script reads: fio with libaio, one reader of 1 MiB reads, 32 in flight;
                # dd with 4 readers per member of 8 MiB reads.
                "engine": "libaio" if method == "fio" else None,
                "readersPerMember": 1 if method == "fio" else 4,
                "blockBytes": 1024**2 if method == "fio" else 8 * 1024**2,
                "queueDepth": 32 if method == "fio" else 1,
                "devices": [
                    {"volumeId": v, "device": devices[v], "size": b, "bytes": b}
                    for v, b in sizes.items()
                ],
            },
            progress=f"read {total} of {total} bytes in {seconds:.0f}s",
            duration=max(1.0, seconds),
        )


class ScriptOutputError(Exception):
    """An emulated script printed a last line its real script cannot print."""


class _Refusal(Exception):
    def __init__(self, error: str, message: str) -> None:
        super().__init__(f"{error}: {message}")
        self.error = error
        self.message = message


# What each script reads, in the order it checks, with the script's own patterns: (parameter,
# check, value when the variable is unset or None for ${SSM_X:-}). A unit test compares these
# patterns with the scripts' require_match lines.
VOLUME_IDS = r"^vol-[0-9a-f]{8,17}(,vol-[0-9a-f]{8,17}){0,39}$"
MD_DEVICE = r"^/dev/md[0-9]{1,3}$"
TRUE_FALSE = r"^(true|false)$"
HOOK = (
    r"^(builtin:(postgresql-checkpoint|postgresql-backup|mysql-lock)"
    r"|(/[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}){1,16}"
    r"( [A-Za-z0-9_=:,@%+-][A-Za-z0-9._=:,@%+-]{0,99}){0,15})$"
)
HOOK_SECONDS = r"^[1-9][0-9]{0,2}$"
SCRIPT_INPUTS: dict[str, tuple[tuple[str, str, str | None], ...]] = {
    "discover": (("ArrayName", r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$", None),),
    "freeze": (
        ("MountPoint", "mount", None),
        ("MountPoint", "not-system", None),
        ("MaxFreezeSeconds", r"^[1-9][0-9]{0,3}$", None),
        ("FreezeToken", r"if-set:^[0-9a-f]{32}$", None),
        ("PreSnapshot", f"if-set:{HOOK}", None),
        ("PostSnapshot", f"if-set:{HOOK}", None),
        ("HookSeconds", HOOK_SECONDS, "60"),
        ("Freeze", TRUE_FALSE, "true"),
    ),
    "thaw": (
        ("MountPoint", "mount", None),
        ("FreezeToken", r"^[0-9a-f]{32}$", None),
        ("MaxFreezeSeconds", r"if-set:^[1-9][0-9]{0,3}$", None),
        ("PostSnapshot", f"if-set:{HOOK}", None),
        ("HookSeconds", HOOK_SECONDS, "60"),
    ),
    "assemble": (
        ("VolumeIds", VOLUME_IDS, None),
        ("MdUuid", r"^[0-9a-f]{8}(:[0-9a-f]{8}){3}$", None),
        ("NewMdUuid", r"^([0-9a-f]{8}(:[0-9a-f]{8}){3})?$", ""),
        ("MdDevice", MD_DEVICE, "/dev/md0"),
        ("OwnMountPoint", TRUE_FALSE, "false"),
        ("MountPoint", "mount", None),
        ("MountPoint", "not-system", None),
        ("ReadOnly", TRUE_FALSE, "false"),
        ("Persist", TRUE_FALSE, "true"),
    ),
    "release": (
        ("MdDevice", MD_DEVICE, "/dev/md0"),
        ("MdUuid", r"if-set:^[0-9a-f]{8}(:[0-9a-f]{8}){3}$", None),
        ("OwnMountPoint", TRUE_FALSE, "false"),
        ("MountPoint", "mount", None),
        ("MountPoint", "not-system", None),
    ),
    "prewarm": (("VolumeIds", VOLUME_IDS, None), ("Method", r"^(auto|fio|dd)$", "auto")),
}
MOUNT_POINT_FORM = r"^(/[A-Za-z0-9._-]+)+$"


def _require_match(name: str, value: str, pattern: str) -> None:
    # bash's [[ =~ ]] is POSIX ERE searched in the string; `$` is the end of the string only.
    if not re.search(pattern.replace("$", r"\Z") if pattern.endswith("$") else pattern, value):
        raise _Refusal("InvalidInput", f"{name} has an invalid value (expected {pattern})")


def _require_mount_point(name: str, value: str) -> None:
    _require_match(name, value, MOUNT_POINT_FORM)
    if len(value) > 201:
        raise _Refusal("InvalidInput", f"{name} is longer than 201 characters")
    if any(seg in (".", "..") for seg in value.lstrip("/").split("/")):
        raise _Refusal("InvalidInput", f"{name} must not contain . or .. segments")
