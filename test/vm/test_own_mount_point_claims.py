"""A replace's own mount point is a claim (the set's record of where the array was mounted):
the scripts hold it to what the instance shows. An array that is assembled but mounted nowhere
is released without blaming every process on the host; and a system directory that has files
in it was never where the array was mounted, so the restored array is not mounted over it and
fstab does not get a line for it."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from vmlib import Commands, blank_disk, boot, new_volume_id

from conftest import record

pytestmark = pytest.mark.vm

UUID = "0badc0de:11112222:33334444:55556666"
NEW = "0badc0de:11112222:33334444:99990000"


def test_an_own_mount_point_over_a_system_directory_with_files_is_refused(
    tmp_path: Path, rng: random.Random
) -> None:
    (tmp_path / "disks").mkdir()
    disks = [blank_disk(tmp_path / "disks" / f"d{i}.img", 64, new_volume_id(rng)) for i in range(2)]
    devs = " ".join(f"$(by_id {d.serial})" for d in disks)
    cmds = Commands()
    own = {"MountPoint": "/var", "OwnMountPoint": "true", "MdDevice": "/dev/md0"}
    scenario = f"""
set -e
mdadm --create /dev/md0 --run --assume-clean --level=0 --chunk=64 --raid-devices=2 \\
  --metadata=1.2 --uuid={UUID} {devs} >/work/create.log 2>&1
mkfs.ext4 -q -F /dev/md0
mkdir -p /var && echo system >/var/marker
cp /etc/fstab /work/fstab.before
set +e
{cmds.ssm("release", "release", MdUuid=UUID, **own)}
{
        cmds.ssm(
            "assemble",
            "assemble",
            VolumeIds=",".join(d.volume_id for d in disks),
            MdUuid=UUID,
            NewMdUuid=NEW,
            ReadOnly="false",
            Persist="true",
            **own,
        )
    }
findmnt -rn -o SOURCE --mountpoint /var >/work/var.source
cat /var/marker >/work/var.marker 2>&1
cp /etc/fstab /work/fstab.after
cat /proc/mdstat >/work/mdstat
"""
    b = record("own mount point claims", boot(tmp_path / "vm", scenario, disks, commands=cmds))

    # Assembled, mounted nowhere, used by nobody: released, with nobody blamed.
    assert b.rc_of("release") == 0, b.explain("release")
    assert b.json_of("release")["stop"] == "stopped"
    # /var has the system's files: not the array's mount point, whatever the claim says.
    assert b.rc_of("assemble") == 1, b.explain("assemble")
    out = b.json_of("assemble")
    assert (out["ok"], out["error"]) == (False, "MountPointNotEmpty"), out
    assert b.text("var.source").strip() == "" and b.text("var.marker").strip() == "system"
    assert b.text("fstab.after") == b.text("fstab.before")
    # What it assembled it stopped again.
    assert "md0" not in b.text("mdstat"), b.text("mdstat")
