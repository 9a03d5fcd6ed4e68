"""release.sh on a redundant array that is degraded but working (RAID 1 with one member marked
faulty): every remaining member is present and the filesystem keeps serving its writers, so the
blockers must be checked as on a healthy array. A lazy unmount here would leave the writers on
an array that is about to be taken away, with new files landing on the root filesystem."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from vmlib import Commands, blank_disk, boot, new_volume_id

from conftest import record

pytestmark = pytest.mark.vm

UUID = "0badc0de:12345678:9abcdef0:13572468"


def test_release_refuses_a_degraded_but_working_array_in_use(
    tmp_path: Path, rng: random.Random
) -> None:
    disks = [blank_disk(tmp_path / f"m{i}.img", 64, new_volume_id(rng)) for i in range(2)]
    cmds = Commands()
    members = " ".join(f"$(by_id {d.serial})" for d in disks)
    rel = {"MdDevice": "/dev/md0", "MountPoint": "/data", "MdUuid": UUID}
    scenario = f"""
set -e
mdadm --create /dev/md0 --run --assume-clean --level=1 --raid-devices=2 --metadata=1.2 \\
  --name=db1 --homehost=srchost --uuid={UUID} {members}
mkfs.ext4 -q -F /dev/md0
mkdir -p /data && mount /dev/md0 /data
# One mirror half fails; md keeps serving every block from the other one.
mdadm /dev/md0 --fail $(by_id {disks[1].serial})
set +e
# An application writing to the array, from a working directory on it.
setsid bash -c 'cd /data && while :; do date >>/data/app.log; sleep 0.2; done' &
writer=$!
sleep 1
{cmds.ssm("in_use", "release", **rel)}
findmnt -rn -o SOURCE --mountpoint /data >/work/mounted || true
sleep 1
stat -f -c %T /data/app.log >/work/app.fs 2>&1 || true
kill -- -$writer; wait $writer 2>/dev/null || true
"""
    b = record("release degraded", boot(tmp_path / "vm", scenario, disks, commands=cmds))
    # THEN /data stays mounted from the array, and the writer keeps writing to the array
    assert b.text("mounted").strip() == "/dev/md0", b.explain("in_use")
    assert b.text("app.fs").strip() == "ext2/ext3", b.text("app.fs")
    # AND the release is refused by name, changing nothing
    assert b.rc_of("in_use") == 1, b.explain("in_use")
    out = b.json_of("in_use")
    assert (out["ok"], out["error"]) == (False, "FilesystemInUse"), out
    assert "Nothing was changed" in out["message"], out
