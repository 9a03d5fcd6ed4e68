"""The local world's arrays, and what a person may do to them from the terminal: look, lose a
member, make the next on-instance assemble fail (``raidsnap local status|break``).

The world is the demo's (demo.py): array db1, RAID 0 of three 32 GiB gp3 volumes on one
instance, with a scratch volume next to them, backed up once by the backup workflow itself; a
second array of that instance, logs (md1 at /logs, two volumes), which a backup of db1 may take
with it (``--with logs``); an instance for drills; db1's recovery configured to restore in
place. Each control acts as
the world outside the executions does: time stands still while it acts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import boto3

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.endpoint import ControlError
from raidsnap_emulation.harness import REGION, Emulation
from raidsnap_emulation.host import MdArray
from raidsnap_emulation.paced import PacedClock
from raidsnap_emulation.world import (
    ArrayFixture,
    add_array,
    backed_up,
    configure_recovery,
    create_topics,
    launch_instance,
    make_array,
)

ARRAY = "db1"
MEMBERS = 3
# The second array of db1's instance.
LOGS = "logs"

# What assemble.sh prints when mdadm cannot assemble the members (its `fail AssembleFailed`
# after three attempts): the JSON line on stdout, the same words on stderr.
_ASSEMBLE_FAILS = (
    "mdadm --assemble /dev/md0 failed: mdadm: /dev/nvme2n1 has no superblock - assembly aborted"
)


@dataclass
class World:
    emu: Emulation
    arrays: dict[str, ArrayFixture]
    drill_instance: str
    seeded_set: str

    @classmethod
    def seed(cls, emu: Emulation) -> World:
        """The demo's world, its array backed up once."""
        fx = make_array(emu.hosts, ARRAY, MEMBERS, size_gib=32, unrelated=1)
        logs = add_array(emu.hosts, fx, LOGS)
        drill = launch_instance(f"{ARRAY}-drill", fx.availability_zone, tag_array=False)
        boto3.client("ec2", region_name=REGION).create_tags(
            Resources=[drill], Tags=[{"Key": "raidsnap:array", "Value": f"{ARRAY}-drill"}]
        )
        create_topics(emu)
        configure_recovery(emu, ARRAY, instanceId=fx.instance_id, mode="replace")
        set_id = backed_up(emu.hosts, emu.run, fx)
        return cls(emu, {ARRAY: fx, LOGS: logs}, drill, set_id)

    def control(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        actions: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "now": lambda _body: {"now": self.emu.clock.now().isoformat()},
            "world": self.describe,
            "clock": self.set_clock,
            "break-member": self.break_member,
            "fail-assemble": self.fail_assemble,
        }
        if name not in actions:
            raise ControlError(f"no control {name!r}; there are {', '.join(sorted(actions))}")
        with self.emu.clock.hold("the person at the terminal"):
            return actions[name](body)

    # -- controls

    def describe(self, _body: dict[str, Any]) -> dict[str, Any]:
        return {
            **self._clock_view(),
            "drillInstance": self.drill_instance,
            "seededSet": self.seeded_set,
            "arrays": [self._array_view(name) for name in sorted(self.arrays)],
        }

    def set_clock(self, body: dict[str, Any]) -> dict[str, Any]:
        """Change the pace of emulated time (``speed``), stop it (``paused`` true) or let it run
        on (``paused`` false)."""
        clock = self._paced()
        if body.get("speed") is not None:
            speed = float(body["speed"])
            if not 0 < speed <= 3600:
                raise ControlError(f"speed must be more than 0 and at most 3600, not {speed:g}")
            clock.pace(speed)
        if body.get("paused") is not None:
            clock.pause(bool(body["paused"]))
        return self._clock_view()

    def break_member(self, body: dict[str, Any]) -> dict[str, Any]:
        """The member in slot ``member`` of the array is lost: EC2 detaches it (forced, as a
        failed volume is), and md on the instance loses it; RAID 0 has no redundancy, so the
        array fails."""
        fx, md = self._array(str(body.get("array", "")))
        slot = int(body.get("member", -1))
        if not 0 <= slot < len(md.members):
            raise ControlError(
                f"array {fx.name} has members 0..{len(md.members) - 1}; no member {slot}"
            )
        volume = md.members[slot]
        ec2 = boto3.client("ec2", region_name=REGION)
        attached = ec2.describe_volumes(VolumeIds=[volume])["Volumes"][0]["Attachments"]
        if not attached:
            raise ControlError(f"member {slot} of {fx.name} ({volume}) is already lost")
        ec2.detach_volume(VolumeId=volume, Force=True)
        self.emu.hosts.lose_member(fx.instance_id, volume)
        return {
            "array": fx.name,
            "member": slot,
            "volumeId": volume,
            "instanceId": fx.instance_id,
            "mdDevice": md.device,
        }

    def fail_assemble(self, _body: dict[str, Any]) -> dict[str, Any]:
        """The next assemble document, on any instance, fails as mdadm makes it fail."""
        self.emu.hosts.fail_next(
            "assemble",
            CommandOutcome(
                status="Failed",
                stdout='{"ok":false,"error":"AssembleFailed","message":"'
                + _ASSEMBLE_FAILS
                + '"}\n',
                stderr=f"raidsnap: AssembleFailed: {_ASSEMBLE_FAILS}\n",
                exit_code=1,
                duration_seconds=20,
            ),
        )
        return {"document": "assemble", "message": _ASSEMBLE_FAILS}

    # -- reading the world

    def _paced(self) -> PacedClock:
        clock = self.emu.clock
        if not isinstance(clock, PacedClock):
            raise ControlError("this world's clock is not paced")
        return clock

    def _clock_view(self) -> dict[str, Any]:
        clock = self._paced()
        running, sleeping = clock.activity()
        return {
            "now": clock.now().isoformat(),
            "speed": clock.speed,
            "paused": clock.paused,
            "running": running,
            "sleeping": sleeping,
        }

    def _array(self, name: str) -> tuple[ArrayFixture, MdArray]:
        fx = self.arrays.get(name)
        if fx is None:
            known = ", ".join(sorted(self.arrays))
            raise ControlError(f"no array {name!r} in this world; it has {known}")
        md = self._md(fx)
        if md is None:
            raise ControlError(f"array {name} is not assembled on {fx.instance_id}")
        return fx, md

    def _md(self, fx: ArrayFixture) -> MdArray | None:
        arrays = self.emu.hosts.state(fx.instance_id).arrays
        mounted = [a for a in arrays.values() if a.mount_point == fx.mount_point]
        if mounted:
            return mounted[0]
        # (db1, restored in place, is md0 again; logs is found by its mount point only)
        return arrays.get("/dev/md0") if fx.name == ARRAY else None

    def _array_view(self, name: str) -> dict[str, Any]:
        fx = self.arrays[name]
        md = self._md(fx)
        state = "not assembled"
        if md is not None:
            state = "failed" if md.failed else "mounted" if md.mount_point else "assembled"
        return {
            "name": name,
            "instanceId": fx.instance_id,
            "availabilityZone": fx.availability_zone,
            "mdDevice": md.device if md else None,
            "mountPoint": md.mount_point if md else fx.mount_point,
            "members": list(md.members) if md else [],
            "state": state,
        }
