"""Review (second) of issue 24, several arrays per instance, on a real kernel: a release of md0
whose member is lost must not take md1 with it. Issue 24: "restores, replace mode, release and
recovery touch only their array's members and never stop, unmount or detach the other
array's".

release.sh refuses "filesystems mounted below" the mount point only while the array still
serves; with a member of a RAID 0 lost (the recovery case) it skips every blocker and runs
`umount -l "$mount_point"`. A lazy unmount detaches "the filesystem and all filesystems mounted
below it" (umount(2), MNT_DETACH), so with logs (md1) mounted inside db1's tree, e.g. PostgreSQL
with its WAL array at /data/wal, the recovery of db1 unmounts logs too: its writers lose their
files, and the WAL array is gone from the namespace though nothing is wrong with it.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_assemble import NEW_UUID
from vmlib import Commands, boot

from conftest import ArraySet, record

pytestmark = pytest.mark.vm


def test_release_of_md0_with_a_lost_member_leaves_md1_mounted_below_it(
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
    scenario = f"""
{cmds.ssm("db1", "assemble", **db1_assemble)}
# logs: md1, mounted inside db1's tree as the instance's own fstab would (the WAL array)
mdadm --assemble /dev/md1 {" ".join(f"$(by_id {d.serial})" for d in logs)} \\
  >/work/md1.log 2>&1
mkdir -p /data/wal && mount /dev/md1 /data/wal
findmnt -rn -o SOURCE --mountpoint /data/wal >/work/wal.before || true
# One member of db1 is lost (its volume impaired, the NVMe controller gone)
detach {db1[1].serial}
sleep 1
{cmds.ssm("release", "release", MdDevice="/dev/md0", MdUuid=NEW_UUID, MountPoint="/data")}
findmnt -rn -o SOURCE --mountpoint /data/wal >/work/wal.after || true
cat /proc/mdstat >/work/mdstat
"""
    b = record(
        "review-two-arrays-nested-release",
        boot(tmp_path / "vm", scenario, db1 + logs, commands=cmds),
    )
    assert b.rc_of("db1") == 0, b.explain("db1")
    assert b.text("wal.before").strip() == "/dev/md1", b.text("md1.log")
    assert "md1 : active" in b.text("mdstat"), b.text("mdstat")
    # md1 stays where it was mounted, whatever the release of md0 did (it may refuse by name)
    assert b.text("wal.after").strip() == "/dev/md1", (b.explain("release"), b.text("mdstat"))
