"""assemble.sh fails after it assembled (and mounted) the array: it undoes what it made, so that no
half-made restore stays assembled, holds its volumes, or comes back mounted at the next boot."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from vmlib import Commands, boot

from conftest import ArraySet, record

pytestmark = pytest.mark.vm


@pytest.mark.parametrize(
    ("case", "prelude", "error"),
    [
        # Something else is mounted at the mount point: found only after the assembly.
        ("mount_point_busy", "mkdir -p /data && mount -t tmpfs scratch /data", "MountPointBusy"),
        # mdadm.conf cannot be written: found only after the mount.
        (
            "persist_fails",
            "rm -f /etc/mdadm/mdadm.conf && mkdir -p /etc/mdadm/mdadm.conf",
            "PersistFailed",
        ),
    ],
)
def test_assemble_undoes_its_own_assembly_and_mount_when_it_fails_after_them(
    case: str,
    prelude: str,
    error: str,
    *,
    raid0_set: ArraySet,
    tmp_path: Path,
    rng: random.Random,
) -> None:
    disks = raid0_set.copies(tmp_path / "disks", rng)
    cmds = Commands()
    assemble = cmds.ssm(
        "assemble",
        "assemble",
        VolumeIds=",".join(d.volume_id for d in disks),
        MdUuid=raid0_set.uuid,
        MdDevice="/dev/md0",
        MountPoint="/data",
        ReadOnly="false",
        Persist="true",
    )
    scenario = f"""
{prelude}
{assemble}
cat /proc/mdstat >/work/mdstat
findmnt -rn -o SOURCE,TARGET >/work/mounts
"""
    b = record(f"assemble undo {case}", boot(tmp_path / "vm", scenario, disks, commands=cmds))

    assert b.rc_of("assemble") == 1, b.explain("assemble")
    out = b.json_of("assemble")
    assert (out["ok"], out["error"]) == (False, error), out
    assert "undone" in out["message"] and "stopped /dev/md0" in out["message"], out
    # nothing of the restore is left: no md array, no mount of it
    assert "md0" not in b.text("mdstat"), b.text("mdstat")
    assert "/dev/md0" not in b.text("mounts"), b.text("mounts")
