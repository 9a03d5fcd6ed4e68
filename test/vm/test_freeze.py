"""Scenario 5: a freeze always ends. The caller is killed right after freezing; a write blocks
while frozen and completes once the guard thaws, within MaxFreezeSeconds. A thaw ends only the
freeze made with its token: another run's, or another tool's, is left frozen."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

import pytest
from vmlib import Commands, blank_disk, boot, deployed_documents, new_volume_id

from conftest import record
from raidsnap_emulation.ssm_agent import InvalidParametersError, render

pytestmark = pytest.mark.vm

MAX_FREEZE = 6
MINE = "0123456789abcdef0123456789abcdef"
OTHER = "fedcba9876543210fedcba9876543210"


def test_guard_thaws_after_caller_is_killed_and_thaw_is_repeatable(
    tmp_path: Path, rng: random.Random
) -> None:
    disk = blank_disk(tmp_path / "f.img", 64, new_volume_id(rng))
    # "/" never reaches the instance: SendCommand refuses it (the script refuses it too, see
    # test_injection and test_ssm_documents).
    with pytest.raises(InvalidParametersError, match="MountPoint"):
        render(deployed_documents()["freeze"], {"MountPoint": ["/"], "MaxFreezeSeconds": ["5"]})
    cmds = Commands()
    f = {"MountPoint": "/mnt/f", "MaxFreezeSeconds": str(MAX_FREEZE), "FreezeToken": MINE}
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
sleep 1  # the guard thaws first, then clears its state
ls /run/raidsnap >/work/state_after_guard 2>&1
{cmds.ssm("thaw1", "thaw", **f)}
{cmds.ssm("thaw2", "thaw", **f)}

# A thaw before the guard fires stops the guard; one with another token changes nothing.
{cmds.ssm("freeze2", "freeze", MountPoint="/mnt/f", MaxFreezeSeconds="300", FreezeToken=MINE)}
{cmds.ssm("freeze3", "freeze", MountPoint="/mnt/f", MaxFreezeSeconds="300", FreezeToken=OTHER)}
{cmds.ssm("thaw_other", "thaw", MountPoint="/mnt/f", FreezeToken=OTHER)}
(dd if=/dev/zero of=/mnt/f/probe2 bs=4k count=1 conv=fsync status=none
 echo done >/work/write2_done) &
sleep 2
if [ -f /work/write2_done ]; then echo no >/work/blocked2; else echo yes >/work/blocked2; fi
{cmds.ssm("thaw3", "thaw", MountPoint="/mnt/f", FreezeToken=MINE)}
wait
pid=$(sed -n 's/.*"guardPid":\\([0-9]*\\).*/\\1/p' /work/freeze2.stdout)
if [ -d /proc/$pid ]; then echo alive >/work/guard2; else echo gone >/work/guard2; fi
echo ok >/mnt/f/after && cat /mnt/f/after >/work/write_after_thaw

# Another tool's freeze (no raidsnap guard): freeze refuses, thaw leaves it frozen.
fsfreeze -f /mnt/f
{cmds.ssm("freeze4", "freeze", MountPoint="/mnt/f", MaxFreezeSeconds="300")}
{cmds.ssm("thaw4", "thaw", MountPoint="/mnt/f", FreezeToken=MINE)}
(dd if=/dev/zero of=/mnt/f/probe3 bs=4k count=1 conv=fsync status=none
 echo done >/work/write3_done) &
sleep 2
if [ -f /work/write3_done ]; then echo no >/work/blocked3; else echo yes >/work/blocked3; fi
fsfreeze -u /mnt/f
wait

# Without a token, freeze makes one and prints it; thaw with it ends the freeze.
{cmds.ssm("freeze5", "freeze", MountPoint="/mnt/f", MaxFreezeSeconds="300")}
grep -o '"token":"[0-9a-f]*"' /work/freeze5.stdout | cut -d'"' -f4 >/work/token5
# (the token is known only here: the script itself, as an operator would run it by hand)
env -i PATH="$PATH" SSM_MountPoint=/mnt/f SSM_FreezeToken="$(cat /work/token5)" \\
  bash "$S/thaw.sh" >/work/thaw5.stdout 2>/work/thaw5.stderr
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
    # The guard thaws at the deadline freeze reported (whole seconds, fixed before it froze),
    # never before it; how long the write waited also depends on how soon this guest looked.
    deadline = datetime.strptime(frozen["thawDeadline"], "%Y-%m-%dT%H:%M:%SZ")
    deadline_at = deadline.replace(tzinfo=UTC).timestamp()
    # frozenAt: when fsfreeze -f ran, by the instance's clock; the deadline counts from it.
    assert deadline_at == frozen["frozenAt"] + MAX_FREEZE
    assert frozen["frozenAt"] <= float(b.text("frozen_at")) < frozen["frozenAt"] + 5
    thawed_at = float(b.text("write_done"))
    elapsed = thawed_at - float(b.text("frozen_at"))
    print(
        f"write blocked for {elapsed:.2f}s with MaxFreezeSeconds={MAX_FREEZE}; "
        f"thawed {thawed_at - deadline_at:+.2f}s from the reported deadline"
    )
    assert deadline_at - 1 < thawed_at < deadline_at + 4
    # The guard removes its state, flag and program; the lock file stays (lib/freeze_guard.sh: a
    # lock file unlinked while held would let the next opener lock another file), and so does
    # the run's record of its first freeze (group-<token>, for an hour: a later freeze of the run
    # is refused after it).
    left = b.text("state_after_guard").split()
    assert [f for f in left if not f.endswith(".lock") and not f.startswith("group-")] == [], left

    for name in ("thaw1", "thaw2"):
        assert b.rc_of(name) == 0, b.explain(name)
        out = b.json_of(name)
        assert out["ok"] is True and out["wasFrozen"] is False and out["guardStopped"] is False

    assert frozen["token"] == MINE
    assert b.rc_of("freeze2") == 0, b.explain("freeze2")
    assert b.rc_of("freeze3") == 1 and b.json_of("freeze3")["error"] == "AlreadyFrozen"
    assert b.rc_of("thaw_other") == 1, b.explain("thaw_other")
    assert b.json_of("thaw_other")["error"] == "NotOurFreeze"
    assert b.text("blocked2").strip() == "yes", "a thaw with another token must not thaw"
    thaw3 = b.json_of("thaw3")
    assert thaw3["wasFrozen"] is True and thaw3["guardStopped"] is True
    assert b.text("guard2").strip() == "gone"
    assert b.text("write_after_thaw").strip() == "ok"

    assert b.rc_of("freeze4") == 1 and b.json_of("freeze4")["error"] == "AlreadyFrozen"
    thaw4 = b.json_of("thaw4")
    assert b.rc_of("thaw4") == 0 and thaw4["wasFrozen"] is False, b.explain("thaw4")
    assert b.text("blocked3").strip() == "yes", "another tool's freeze must stay frozen"
    assert b.rc_of("freeze5") == 0, b.explain("freeze5")
    assert len(b.text("token5").strip()) == 32
    assert '"wasFrozen":true' in b.text("thaw5.stdout"), b.text("thaw5.stderr")
