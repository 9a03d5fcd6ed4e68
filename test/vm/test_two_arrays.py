"""Two arrays on one guest: db1 (RAID 0, XFS) as /dev/md0 at /data and logs (RAID 10, ext4) as
/dev/md1 at /logs. Discovery reports both with their own members; releasing db1 and assembling
it again leaves logs assembled and mounted, and not one byte of it changes."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_assemble import NEW_UUID
from vmlib import Commands, boot

from conftest import ArraySet, record

pytestmark = pytest.mark.vm

LOGS_NEW_UUID = "10651065:a5a5a5a5:5a5a5a5a:01234567"


def test_release_and_assemble_of_md0_leave_md1_mounted_and_unchanged(
    raid0_set: ArraySet, raid10_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    db1 = raid0_set.copies(tmp_path / "db1", rng)
    logs = raid10_set.copies(tmp_path / "logs", rng)
    cmds = Commands()
    db1_assemble = {
        "VolumeIds": ",".join(d.volume_id for d in db1),
        "MdUuid": raid0_set.uuid,
        "NewMdUuid": NEW_UUID,
        "MdDevice": "/dev/md0",
        "MountPoint": "/data",
        "ReadOnly": "false",
        "Persist": "false",
    }
    # logs read-only: nothing but raidsnap could then write to it, so its bytes must not move
    logs_assemble = {
        "VolumeIds": ",".join(d.volume_id for d in logs),
        "MdUuid": raid10_set.uuid,
        "NewMdUuid": LOGS_NEW_UUID,
        "MdDevice": "/dev/md1",
        "MountPoint": "/logs",
        "ReadOnly": "true",
        "Persist": "false",
    }
    logs_devices = " ".join(f"$(by_id {d.serial})" for d in logs)
    scenario = f"""
image() {{
  sha256sum /dev/md1 | cut -d' ' -f1
  for d in {logs_devices}; do sha256sum $d | cut -d' ' -f1; done
}}
{cmds.ssm("db1", "assemble", **db1_assemble)}
{cmds.ssm("logs", "assemble", **logs_assemble)}
sync; image >/work/image.before
{cmds.ssm("discover", "discover", ArrayName="logs")}
{cmds.ssm("release", "release", MdDevice="/dev/md0", MdUuid=NEW_UUID, MountPoint="/data")}
findmnt -rn -o SOURCE --mountpoint /logs >/work/logs.after-release || true
{cmds.ssm("again", "assemble", **db1_assemble)}
sync; image >/work/image.after
findmnt -rn -o SOURCE --mountpoint /logs >/work/logs.mount || true
(cd /logs && find . -type f | sort | xargs sha256sum) >/work/logs.sums
cat /proc/mdstat >/work/mdstat
"""
    b = record("two arrays", boot(tmp_path / "vm", scenario, db1 + logs, commands=cmds))

    for name in ("db1", "logs", "discover", "release", "again"):
        assert b.rc_of(name) == 0, b.explain(name)
    # discovery tells the two apart, each with its own members
    found = {a["uuid"]: a for a in b.json_of("discover")["arrays"]}
    assert set(found) == {NEW_UUID, LOGS_NEW_UUID}
    members = {u: {m["volumeId"] for m in a["members"]} for u, a in found.items()}
    assert members[NEW_UUID] == {d.volume_id for d in db1}
    assert members[LOGS_NEW_UUID] == {d.volume_id for d in logs}
    assert found[LOGS_NEW_UUID]["mountPoint"] == "/logs"
    # release took db1 only
    released = b.json_of("release")
    assert {m["volumeId"] for m in released["members"]} == {d.volume_id for d in db1}
    assert b.text("logs.after-release").strip() == "/dev/md1"
    # logs stayed mounted, its files as made, and its image (md1 and each member) unchanged
    assert b.text("logs.mount").strip() == "/dev/md1"
    assert b.text("logs.sums") == raid10_set.sums
    before = b.text("image.before").split()
    assert len(before) == 1 + len(logs) and b.text("image.after").split() == before
    assert "md1 : active" in b.text("mdstat") and "md0 : active" in b.text("mdstat")
