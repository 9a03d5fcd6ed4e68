"""Scenario 5: a freeze always ends. The caller is killed right after freezing; a write blocks
while frozen and completes once the guard thaws, within MaxFreezeSeconds."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from vmlib import Commands, blank_disk, boot, deployed_documents, new_volume_id

from conftest import record
from raidsnap_emulation.ssm_agent import InvalidParametersError, render

pytestmark = pytest.mark.vm

MAX_FREEZE = 6


def test_guard_thaws_after_caller_is_killed_and_thaw_is_repeatable(
    tmp_path: Path, rng: random.Random
) -> None:
    disk = blank_disk(tmp_path / "f.img", 64, new_volume_id(rng))
    # "/" never reaches the instance: SendCommand refuses it (the script refuses it too, see
    # test_injection and test_ssm_documents).
    with pytest.raises(InvalidParametersError, match="MountPoint"):
        render(deployed_documents()["freeze"], {"MountPoint": ["/"], "MaxFreezeSeconds": ["5"]})
    cmds = Commands()
    f = {"MountPoint": "/mnt/f", "MaxFreezeSeconds": str(MAX_FREEZE)}
    scenario = f"""
mkfs.ext4 -q -F $(by_id {disk.serial})
mkdir -p /mnt/f && mount $(by_id {disk.serial}) /mnt/f

# The caller: its own process group, running freeze and then lingering, as an SSM command would.
setsid bash -c '. /work/lib.sh
  {cmds.ssm("freeze", "freeze", **f)}
  sleep 600' &
caller=$!
while [ ! -f /work/freeze.rc ]; do sleep 0.05; done
date +%s.%N >/work/frozen_at
kill -KILL -- -$caller
(dd if=/dev/zero of=/mnt/f/probe bs=4k count=1 conv=fsync status=none
 date +%s.%N >/work/write_done) &
writer=$!
sleep 2
if [ -f /work/write_done ]; then echo no >/work/blocked; else echo yes >/work/blocked; fi
wait $writer
ls /run/raidsnap >/work/state_after_guard 2>&1
{cmds.ssm("thaw1", "thaw", **f)}
{cmds.ssm("thaw2", "thaw", **f)}

# A thaw before the guard fires stops the guard.
{cmds.ssm("freeze2", "freeze", MountPoint="/mnt/f", MaxFreezeSeconds="300")}
{cmds.ssm("freeze3", "freeze", MountPoint="/mnt/f", MaxFreezeSeconds="300")}
{cmds.ssm("thaw3", "thaw", MountPoint="/mnt/f")}
pid=$(sed -n 's/.*"guardPid":\\([0-9]*\\).*/\\1/p' /work/freeze2.stdout)
if [ -d /proc/$pid ]; then echo alive >/work/guard2; else echo gone >/work/guard2; fi
echo ok >/mnt/f/after && cat /mnt/f/after >/work/write_after_thaw
"""
    b = record("freeze/thaw", boot(tmp_path / "vm", scenario, [disk], commands=cmds))

    assert b.rc_of("freeze") == 0, b.explain("freeze")
    frozen = b.json_of("freeze")
    assert (
        frozen["ok"] is True
        and frozen["frozen"] is True
        and frozen["maxFreezeSeconds"] == MAX_FREEZE
    )
    assert b.text("blocked").strip() == "yes", "a write must block while the filesystem is frozen"
    elapsed = float(b.text("write_done")) - float(b.text("frozen_at"))
    print(f"write blocked for {elapsed:.2f}s with MaxFreezeSeconds={MAX_FREEZE}")
    assert MAX_FREEZE - 1.5 < elapsed < MAX_FREEZE + 4
    assert b.text("state_after_guard").strip() == "", "the guard removes its state file"

    for name in ("thaw1", "thaw2"):
        assert b.rc_of(name) == 0, b.explain(name)
        out = b.json_of(name)
        assert out["ok"] is True and out["wasFrozen"] is False and out["guardStopped"] is False

    assert b.rc_of("freeze2") == 0, b.explain("freeze2")
    assert b.rc_of("freeze3") == 1 and b.json_of("freeze3")["error"] == "AlreadyFrozen"
    thaw3 = b.json_of("thaw3")
    assert thaw3["wasFrozen"] is True and thaw3["guardStopped"] is True
    assert b.text("guard2").strip() == "gone"
    assert b.text("write_after_thaw").strip() == "ok"
