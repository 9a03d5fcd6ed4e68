"""The instance side of the emulation: md superblocks on EBS volumes, and answers to raidsnap's
SSM documents as the real scripts would give them.

A volume restored from a snapshot carries the superblock its source volume had, so an array
backed up and restored elsewhere assembles by the same md UUID, and a foreign or missing
member is refused just as mdadm would refuse it.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from moto.ec2.models import ec2_backends

from raidsnap_emulation.double import AwsDouble, CommandContext, CommandOutcome

ACCOUNT = "123456789012"


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


@dataclass
class InstanceState:
    arrays: dict[str, MdArray] = field(default_factory=dict)
    frozen: set[str] = field(default_factory=set)
    mdadm_conf: dict[str, str] = field(default_factory=dict)  # md uuid -> ARRAY line
    fstab: dict[str, str] = field(default_factory=dict)  # fs uuid -> line
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
                double.on_command(name, responders[kind])
        self.failures: dict[str, CommandOutcome] = {}

    # ------------------------------------------------------------------ moto's view

    def _backend(self) -> Any:
        return ec2_backends[ACCOUNT][self.region]

    def attached(self, instance_id: str) -> dict[str, str]:
        """Device name -> volume id, as EC2 has them attached now."""
        instance = self._backend().get_instance(instance_id)
        return {dev: bd.volume_id for dev, bd in instance.block_device_mapping.items()}

    def nvme_devices(self, instance_id: str) -> dict[str, str]:
        """Volume id -> /dev/nvmeXn1, numbered in attachment order as Nitro does."""
        order = list(self.attached(instance_id).values())
        return {vid: f"/dev/nvme{i}n1" for i, vid in enumerate(order)}

    def volume_size_bytes(self, volume_id: str) -> int:
        return int(self._backend().get_volume(volume_id).size) * 1024**3

    def superblock(self, volume_id: str) -> Superblock | None:
        """The superblock a volume carries: its own, or the one its snapshot's source had."""
        seen: set[str] = set()
        current = volume_id
        backend = self._backend()
        while current not in self.superblocks and current not in seen:
            seen.add(current)
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

    def lose_member(self, instance_id: str, volume_id: str) -> None:
        """A member volume is gone: the array fails (RAID 0 has no redundancy)."""
        for array in self.state(instance_id).arrays.values():
            if volume_id in array.members:
                array.failed = True

    def fail_next(self, kind: str, outcome: CommandOutcome) -> None:
        """Make the next command of this document kind end with ``outcome``."""
        self.failures[kind] = outcome

    # ------------------------------------------------------------------ responders

    def _take_failure(self, kind: str) -> CommandOutcome | None:
        with self._lock:
            return self.failures.pop(kind, None)

    @staticmethod
    def _param(ctx: CommandContext, name: str, default: str = "") -> str:
        values = ctx.parameters.get(name) or [default]
        return values[0]

    @staticmethod
    def _ok(result: dict[str, Any], progress: str = "", duration: float = 1.0) -> CommandOutcome:
        stdout = (progress + "\n" if progress else "") + json.dumps(result)
        return CommandOutcome(status="Success", stdout=stdout, duration_seconds=duration)

    @staticmethod
    def _refuse(error: str, message: str) -> CommandOutcome:
        return CommandOutcome(
            status="Failed",
            stdout=json.dumps({"ok": False, "error": error, "message": message}),
            stderr=f"raidsnap: {message}",
            exit_code=1,
            duration_seconds=1.0,
        )

    def _discover(self, ctx: CommandContext) -> CommandOutcome:
        failure = self._take_failure("discover")
        if failure:
            return failure
        state = self.state(ctx.instance_id)
        devices = self.nvme_devices(ctx.instance_id)
        arrays = []
        for md in state.arrays.values():
            if md.failed:
                continue
            sb = self.superblocks.get(md.members[0]) or self.superblock(md.members[0])
            fs = self.filesystems.get(md.md_uuid)
            arrays.append(
                {
                    "device": md.device,
                    "name": sb.name if sb else None,
                    "uuid": md.md_uuid,
                    "level": sb.level if sb else None,
                    "chunkKib": sb.chunk_kib if sb else None,
                    "metadata": "1.2",
                    "state": "clean",
                    "raidDevices": len(md.members),
                    "members": [
                        {
                            "device": devices.get(vid),
                            "serial": _serial(vid),
                            "volumeId": vid,
                            "slot": slot,
                        }
                        for slot, vid in enumerate(md.members)
                    ],
                    "filesystem": (
                        {"type": fs.type, "uuid": fs.uuid, "label": fs.label} if fs else None
                    ),
                    "mountPoint": md.mount_point,
                }
            )
        return self._ok({"ok": True, "arrays": arrays}, duration=2.0)

    def _freeze(self, ctx: CommandContext) -> CommandOutcome:
        failure = self._take_failure("freeze")
        if failure:
            return failure
        mount = self._param(ctx, "MountPoint")
        self.state(ctx.instance_id).frozen.add(mount)
        return self._ok({"ok": True, "mountPoint": mount, "frozen": True})

    def _thaw(self, ctx: CommandContext) -> CommandOutcome:
        failure = self._take_failure("thaw")
        if failure:
            return failure
        mount = self._param(ctx, "MountPoint")
        self.state(ctx.instance_id).frozen.discard(mount)
        return self._ok({"ok": True, "mountPoint": mount, "frozen": False})

    def _assemble(self, ctx: CommandContext) -> CommandOutcome:
        failure = self._take_failure("assemble")
        if failure:
            return failure
        wanted = [v for v in self._param(ctx, "VolumeIds").split(",") if v]
        md_uuid = self._param(ctx, "MdUuid")
        md_device = self._param(ctx, "MdDevice", "/dev/md0")
        mount = self._param(ctx, "MountPoint")
        read_only = self._param(ctx, "ReadOnly", "false") == "true"
        persist = self._param(ctx, "Persist", "true") == "true"
        attached = set(self.attached(ctx.instance_id).values())
        missing = [v for v in wanted if v not in attached]
        if missing:
            return self._refuse("MissingMember", f"members not present: {','.join(missing)}")
        blocks = {v: self.superblock(v) for v in wanted}
        foreign = [v for v, sb in blocks.items() if sb is None or sb.md_uuid != md_uuid]
        if foreign:
            return self._refuse(
                "UuidMismatch", f"{','.join(foreign)} do not carry md UUID {md_uuid}"
            )
        expected = {sb.raid_devices for sb in blocks.values() if sb}
        if expected != {len(wanted)}:
            return self._refuse(
                "MemberCountMismatch",
                f"superblocks say {sorted(expected)} devices, {len(wanted)} given",
            )
        state = self.state(ctx.instance_id)
        by_slot = sorted(wanted, key=lambda v: blocks[v].slot if blocks[v] else 0)  # type: ignore[union-attr]
        current = state.arrays.get(md_device)
        changed = not (current and current.md_uuid == md_uuid and current.members == by_slot)
        if current and current.md_uuid != md_uuid and not current.failed:
            return self._refuse("DeviceBusy", f"{md_device} is another array")
        state.arrays[md_device] = MdArray(md_device, md_uuid, by_slot, mount or None, read_only)
        fs = self.filesystems.get(md_uuid)
        if persist:
            state.mdadm_conf[md_uuid] = f"ARRAY {md_device} metadata=1.2 UUID={md_uuid}"
            if fs and mount:
                opts = "defaults,nofail,x-systemd.device-timeout=30s" + (",ro" if read_only else "")
                state.fstab[fs.uuid] = f"UUID={fs.uuid} {mount} {fs.type} {opts} 0 0"
        devices = self.nvme_devices(ctx.instance_id)
        return self._ok(
            {
                "ok": True,
                "mdDevice": md_device,
                "uuid": md_uuid,
                "members": [
                    {"volumeId": v, "device": devices.get(v), "slot": i}
                    for i, v in enumerate(by_slot)
                ],
                "mountPoint": mount or None,
                "readOnly": read_only,
                "persisted": {"mdadmConf": persist, "initramfs": persist, "fstab": persist},
                "changed": changed,
            },
            progress=f"assembled {md_device} from {len(by_slot)} members",
            duration=5.0,
        )

    def _release(self, ctx: CommandContext) -> CommandOutcome:
        failure = self._take_failure("release")
        if failure:
            return failure
        md_device = self._param(ctx, "MdDevice", "/dev/md0")
        state = self.state(ctx.instance_id)
        released = state.arrays.pop(md_device, None)
        devices = self.nvme_devices(ctx.instance_id)
        # As release.sh prints them: one object per member the md device had.
        members = [
            {"device": devices.get(v), "volumeId": v, "slot": i, "state": "in_sync"}
            for i, v in enumerate(released.members if released else [])
        ]
        return self._ok(
            {
                "ok": True,
                "mdDevice": md_device,
                "mountPoint": self._param(ctx, "MountPoint"),
                "released": released is not None,
                "members": members,
                "changed": released is not None,
            },
            duration=2.0,
        )

    def _prewarm(self, ctx: CommandContext) -> CommandOutcome:
        failure = self._take_failure("prewarm")
        if failure:
            return failure
        volume_ids = [v for v in self._param(ctx, "VolumeIds").split(",") if v]
        sizes = {v: self.volume_size_bytes(v) for v in volume_ids}
        total = sum(sizes.values())
        # Members are read in parallel: the slowest (largest) sets the pace.
        seconds = max(sizes.values(), default=0) / (self.prewarm_mib_per_second * 1024**2)
        self.state(ctx.instance_id).prewarmed.extend(volume_ids)
        method = self._param(ctx, "Method", "auto")
        return self._ok(
            {
                "ok": True,
                "method": "fio" if method == "auto" else method,
                "bytes": total,
                "seconds": round(seconds, 1),
                "devices": [{"volumeId": v, "bytes": b} for v, b in sizes.items()],
            },
            progress=f"prewarm: {total} bytes from {len(volume_ids)} members",
            duration=max(1.0, seconds),
        )
