"""A replace puts an array back on the mount point it was released from, its own: there the
assemble and release documents take a system directory itself (/srv, /home, /opt) when the
workflow says so (OwnMountPoint=true), never a system tree (/etc, /usr, ...); without it they
refuse /srv as a new mount point, changing nothing."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from vmlib import Commands, boot

from conftest import ArraySet, record

pytestmark = pytest.mark.vm


NEW_UUID = "5e5e5e5e:12341234:abcdabcd:00110011"


def test_assemble_and_release_take_a_system_directory_only_as_the_array_own(
    raid0_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    disks = raid0_set.copies(tmp_path / "disks", rng)
    common = {
        "VolumeIds": ",".join(d.volume_id for d in disks),
        "MdUuid": raid0_set.uuid,
        "NewMdUuid": NEW_UUID,
        "ReadOnly": "false",
        "Persist": "true",
    }
    wait = {"RAIDSNAP_DEVICE_WAIT_SECONDS": "5"}
    cmds = Commands()
    new = cmds.ssm("new", "assemble", wait, MountPoint="/srv", **common)
    tree = cmds.ssm("tree", "assemble", wait, MountPoint="/etc/db", OwnMountPoint="true", **common)
    own = cmds.ssm("own", "assemble", wait, MountPoint="/srv", OwnMountPoint="true", **common)
    release_new = cmds.ssm("release_new", "release", MountPoint="/srv", MdUuid=NEW_UUID)
    release_own = cmds.ssm(
        "release_own", "release", MountPoint="/srv", MdUuid=NEW_UUID, OwnMountPoint="true"
    )
    scenario = f"""
mkdir -p /srv
{new}
cat /etc/fstab >/work/fstab.after-new
{tree}
{own}
findmnt -rn -o SOURCE /srv >/work/srv.source
{release_new}
findmnt -rn -o SOURCE /srv >/work/srv.after-release-new
{release_own}
findmnt -rn -o SOURCE /srv >/work/srv.after-release-own || true
ls -A /srv >/work/srv.after 2>&1 || true
"""
    b = record("own mount point /srv", boot(tmp_path / "vm", scenario, disks, commands=cmds))

    # A new mount point at /srv itself: refused before anything changes
    assert b.rc_of("new") == 2, b.explain("new")
    assert b.json_of("new")["error"] == "InvalidInput"
    assert "system directory /srv" in b.json_of("new")["message"]
    assert b.text("fstab.after-new").strip() == ""
    # A tree stays refused even as the array's own
    assert b.rc_of("tree") == 2, b.explain("tree")
    assert "system directory /etc" in b.json_of("tree")["message"]
    # The array's own mount point: assembled and mounted there
    assert b.rc_of("own") == 0, b.explain("own")
    assert b.json_of("own")["ok"] is True
    assert b.text("srv.source").strip() == "/dev/md0"
    # Release without OwnMountPoint refuses /srv and leaves the array mounted; with it, releases
    assert b.rc_of("release_new") == 2, b.explain("release_new")
    assert b.text("srv.after-release-new").strip() == "/dev/md0"
    assert b.rc_of("release_own") == 0, b.explain("release_own")
    assert b.text("srv.after-release-own").strip() == ""
    # /srv is the empty directory it was once the array is released
    assert b.text("srv.after").strip() == ""
