"""release.sh checks every blocker before it changes anything: a filesystem in use (open files,
a working directory), mounted a second time (a bind mount), or frozen by a backup is refused
with a named error and stays mounted, its array running and its writers writing to it. It
never unmounts lazily while every member is present."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_assemble import NEW_UUID
from vmlib import Commands, boot

from conftest import ArraySet, record

pytestmark = pytest.mark.vm

TOKEN = "7e1ea5e0000000000000000000000001"  # noqa: S105 - a freeze token


def test_release_refuses_each_blocker_and_changes_nothing(
    raid0_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    disks = raid0_set.copies(tmp_path / "disks", rng)
    cmds = Commands()
    assemble = {
        "VolumeIds": ",".join(d.volume_id for d in disks),
        "MdUuid": raid0_set.uuid,
        "NewMdUuid": NEW_UUID,
        "MdDevice": "/dev/md0",
        "MountPoint": "/data",
        "ReadOnly": "false",
        "Persist": "false",
    }
    # The restored array carries its own identity: release is told that one.
    rel = {"MdDevice": "/dev/md0", "MountPoint": "/data", "MdUuid": NEW_UUID}
    state = (
        "{ findmnt -rn -o SOURCE --mountpoint /data; "
        "cat /sys/block/md0/md/array_state 2>/dev/null || echo gone; }"
    )
    scenario = f"""
{cmds.ssm("assemble", "assemble", **assemble)}

# An application writing to the array, from a working directory on it.
(cd /data && while :; do date >>/data/app.log; sleep 0.2; done) &
writer=$!
sleep 1
{cmds.ssm("in_use", "release", **rel)}
{state} >/work/state.in_use
sleep 1; kill $writer; wait $writer 2>/dev/null || true
wc -l </data/app.log >/work/app.lines
stat -f -c %T /data/app.log >/work/app.fs

# The same filesystem bind-mounted elsewhere.
mkdir -p /srv/bound && mount --bind /data/db /srv/bound
{cmds.ssm("bound", "release", **rel)}
{state} >/work/state.bound
umount /srv/bound

# A backup's freeze, still held (its guard thaws it after 60 s at the latest).
{cmds.ssm("freeze", "freeze", MountPoint="/data", MaxFreezeSeconds="60", FreezeToken=TOKEN)}
{cmds.ssm("frozen", "release", **rel)}
{state} >/work/state.frozen
{cmds.ssm("thaw", "thaw", MountPoint="/data", FreezeToken=TOKEN)}

# Nothing left in the way: the release goes through, without a lazy unmount.
{cmds.ssm("free", "release", **rel)}
cat /proc/mdstat >/work/mdstat
"""
    b = record("release blockers", boot(tmp_path / "vm", scenario, disks, commands=cmds))

    assert b.rc_of("assemble") == 0, b.explain("assemble")
    for step, error in (
        ("in_use", "FilesystemInUse"),
        ("bound", "MountedElsewhere"),
        ("frozen", "FilesystemFrozen"),
    ):
        assert b.rc_of(step) == 1, b.explain(step)
        out = b.json_of(step)
        assert (out["ok"], out["error"]) == (False, error), out
        assert "Nothing was changed" in out["message"], out
        # still mounted from the array, which still runs
        mounted, array_state = b.text(f"state.{step}").split()
        assert mounted == "/dev/md0" and array_state in ("clean", "active"), (step, mounted)
    assert "(bash)" in b.json_of("in_use")["message"]  # names who blocks it
    # the writer kept writing to the array, never to the root filesystem underneath
    assert int(b.text("app.lines")) > 5
    assert b.text("app.fs").strip() == "xfs"

    assert b.rc_of("freeze") == 0 and b.rc_of("thaw") == 0, b.explain("thaw")
    assert b.rc_of("free") == 0, b.explain("free")
    assert b.json_of("free")["unmount"] == "unmounted"
    assert "md0" not in b.text("mdstat")
