"""Scenario 8: release unmounts and stops, leaves superblocks alone, and is safe to repeat;
with a member gone it detaches lazily; it never unmounts a filesystem that is not the array."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_assemble import NEW_UUID
from vmlib import Commands, boot

from conftest import ArraySet, record

pytestmark = pytest.mark.vm


def test_release_stops_array_and_keeps_superblocks(
    raid0_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    disks = raid0_set.copies(tmp_path / "disks", rng)
    vols = ",".join(d.volume_id for d in disks)
    cmds = Commands()
    assemble = {
        "VolumeIds": vols,
        "MdUuid": raid0_set.uuid,
        "NewMdUuid": NEW_UUID,
        "MdDevice": "/dev/md0",
        "MountPoint": "/data",
        "ReadOnly": "false",
        "Persist": "false",
    }
    rel = {"MdDevice": "/dev/md0", "MountPoint": "/data"}
    superblocks = " ".join(f"$(by_id {d.serial})" for d in disks)
    scenario = f"""
sb() {{
  for d in {superblocks}; do
    dd if=$d bs=4096 skip=1 count=1 status=none | sha256sum
    mdadm --examine --export $d | grep -E 'MD_(UUID|DEV_UUID|LEVEL|DEVICES)='
  done
}}
{cmds.ssm("assemble", "assemble", **assemble)}
echo hello >/data/after-restore && sync
mkdir -p /other && mount -t tmpfs tmpfs /other
{cmds.ssm("wrong", "release", MdDevice="/dev/md0", MountPoint="/other")}
findmnt -rn -o FSTYPE --mountpoint /other >/work/other
sleep 1; sb >/work/sb.before
{cmds.ssm("rel1", "release", **rel)}
sync; sb >/work/sb.after
{cmds.ssm("rel2", "release", **rel)}
cat /proc/mdstat >/work/mdstat
findmnt -rn --mountpoint /data >/work/data_mount || true

# A member disappears (its NVMe controller is unplugged): release must still get the array off.
{cmds.ssm("again", "assemble", **assemble)}
victim=$(by_id {disks[1].serial})
echo 1 >/sys/block/${{victim#/dev/}}/device/device/remove
sleep 1
{cmds.ssm("rel3", "release", **rel)}
cat /proc/mdstat >/work/mdstat3
"""
    b = record("release", boot(tmp_path / "vm", scenario, disks, commands=cmds))

    assert b.rc_of("assemble") == 0, b.explain("assemble")
    assert b.rc_of("wrong") == 1 and b.json_of("wrong")["error"] == "MountPointMismatch"
    assert b.text("other").strip() == "tmpfs"

    assert b.rc_of("rel1") == 0, b.explain("rel1")
    r1 = b.json_of("rel1")
    assert r1 == {
        **r1,
        "ok": True,
        "unmount": "unmounted",
        "stop": "stopped",
        "memberLost": False,
        "changed": True,
    }
    assert sorted(m["volumeId"] for m in r1["members"]) == sorted(d.volume_id for d in disks)
    assert b.text("sb.after") == b.text("sb.before"), "release must not write the superblocks"
    r2 = b.json_of("rel2")
    assert (
        b.rc_of("rel2") == 0 and r2["unmount"] == "not-mounted" and r2["stop"] == "already-stopped"
    )
    assert r2["changed"] is False
    assert "md0" not in b.text("mdstat") and b.text("data_mount").strip() == ""

    assert b.rc_of("again") == 0, b.explain("again")
    assert b.rc_of("rel3") == 0, b.explain("rel3")
    r3 = b.json_of("rel3")
    assert r3["memberLost"] is True and r3["unmount"] == "lazy" and r3["stop"] == "stopped"
    assert "md0" not in b.text("mdstat3")
    # The member whose device is gone has no serial to read: reported with its slot and no
    # volume id, which the workflow then resolves from EC2's attachments (or refuses by name)
    lost = [m for m in r3["members"] if m["volumeId"] is None]
    assert [m["slot"] for m in lost] == [1], r3["members"]
    mapped = sorted(m["volumeId"] for m in r3["members"] if m["volumeId"])
    assert mapped == sorted(d.volume_id for d in disks if d is not disks[1])
