"""Discover on degraded arrays and with spares, on the real md driver: a member's slot is its
RaidDevice number, and a device that holds no working slot (a spare, a member md marked faulty
or has removed) is reported with slot null, so the backup never takes it for a member."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from vmlib import Commands, blank_disk, boot, new_volume_id

from conftest import record

pytestmark = pytest.mark.vm


def test_slots_of_a_degraded_raid10_and_a_raid5_with_a_spare(
    tmp_path: Path, rng: random.Random
) -> None:
    r10 = [blank_disk(tmp_path / f"a{i}.img", 32, new_volume_id(rng)) for i in range(4)]
    r5 = [blank_disk(tmp_path / f"b{i}.img", 32, new_volume_id(rng)) for i in range(4)]
    cmds = Commands()
    ten = " ".join(f"$(by_id {d.serial})" for d in r10)
    five = " ".join(f"$(by_id {d.serial})" for d in r5[:3])
    failing = f"$(by_id {r10[2].serial})"
    scenario = f"""
set -e
mdadm --create /dev/md0 --run --assume-clean --level=10 --chunk=64 --raid-devices=4 \\
  --metadata=1.2 --name=db1 --homehost=srchost {ten}
mdadm --create /dev/md1 --run --assume-clean --level=5 --chunk=64 --raid-devices=3 \\
  --metadata=1.2 --name=logs --homehost=srchost {five}
mdadm /dev/md1 --add-spare $(by_id {r5[3].serial})
{cmds.ssm("healthy", "discover", ArrayName="db1")}
mdadm /dev/md0 --fail {failing}
{cmds.ssm("faulty", "discover", ArrayName="db1")}
mdadm /dev/md0 --remove {failing}
{cmds.ssm("removed", "discover", ArrayName="db1")}
mdadm --stop /dev/md0 /dev/md1
"""
    b = record("discover degraded", boot(tmp_path / "vm", scenario, r10 + r5, commands=cmds))
    assert b.rc == 0, b.text("scenario.stderr")[-3000:]

    def arrays(name: str) -> dict[str, dict]:
        assert b.rc_of(name) == 0, b.explain(name)
        return {a["device"]: a for a in b.json_of(name)["arrays"]}

    healthy = arrays("healthy")
    # RAID 10 in order, nothing missing
    md0 = healthy["/dev/md0"]
    assert [(m["volumeId"], m["slot"]) for m in md0["members"]] == [
        (d.volume_id, i) for i, d in enumerate(r10)
    ]
    assert (md0["raidDevices"], md0["degraded"]) == (4, 0)
    assert {m["state"] for m in md0["members"]} == {"in_sync"}
    # RAID 5: three members in their slots, the spare with none
    md1 = healthy["/dev/md1"]
    slots = {m["volumeId"]: m["slot"] for m in md1["members"]}
    assert slots == {r5[0].volume_id: 0, r5[1].volume_id: 1, r5[2].volume_id: 2,
                     r5[3].volume_id: None}  # fmt: skip
    spare = next(m for m in md1["members"] if m["volumeId"] == r5[3].volume_id)
    assert spare["state"] == "spare"
    assert (md1["raidDevices"], md1["degraded"]) == (3, 0)

    # The failed member is still listed, faulty, with no slot; md counts one device missing
    md0 = arrays("faulty")["/dev/md0"]
    failed = next(m for m in md0["members"] if m["volumeId"] == r10[2].volume_id)
    assert failed["slot"] is None and "faulty" in failed["state"]
    assert sorted(m["slot"] for m in md0["members"] if m["slot"] is not None) == [0, 1, 3]
    assert (md0["raidDevices"], md0["degraded"]) == (4, 1)

    # Removed, it is no longer listed at all; slot 2 stays missing
    md0 = arrays("removed")["/dev/md0"]
    assert [(m["volumeId"], m["slot"]) for m in md0["members"]] == [
        (r10[0].volume_id, 0), (r10[1].volume_id, 1), (r10[3].volume_id, 3)
    ]  # fmt: skip
    assert (md0["raidDevices"], md0["degraded"]) == (4, 1)
