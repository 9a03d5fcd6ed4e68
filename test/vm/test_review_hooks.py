"""Review of issue 24 on a real kernel: a pre hook that runs longer than MaxFreezeSeconds (the
config allows hooks.timeoutSeconds up to 999 and defaults.maxFreezeSeconds up to 900 and never
compares them; a run's input may raise timeoutSeconds too) lets the guard fire before the freeze:
it runs the post hook and removes its state, then freeze.sh freezes /data with no guard left and
thaw.sh, finding no state, never thaws it. /data stays frozen: every write blocks."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_assemble import NEW_UUID
from test_freeze import MINE
from vmlib import Commands, boot

from conftest import ArraySet, record

pytestmark = pytest.mark.vm

SLOW = r"""#!/bin/bash
echo "$2 $1" >>/work/hooklog
[ "$1-$2" = "slow-pre" ] && sleep 6
exit 0
"""


def test_a_pre_hook_slower_than_the_freeze_bound_leaves_data_writable(
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
    base = {"MountPoint": "/data", "FreezeToken": MINE, "HookSeconds": "20"}
    hooks = {"PreSnapshot": "/work/slow.sh slow", "PostSnapshot": "/work/slow.sh slow"}
    scenario = f"""
chmod 0755 /work/slow.sh
writable() {{
  rm -f /work/wrote; (touch /data/probe && touch /work/wrote) </dev/null >/dev/null 2>&1 &
  sleep 1; if [ -e /work/wrote ]; then echo yes; else echo no; fi
}}
{cmds.ssm("assemble", "assemble", **assemble)}
: >/work/hooklog
{cmds.ssm("freeze", "freeze", **base, **hooks, MaxFreezeSeconds="3")}
{cmds.ssm("thaw", "thaw", **base, PostSnapshot=hooks["PostSnapshot"])}
sleep 5
echo "$(writable)" >/work/after
cp /work/hooklog /work/hooklog.final
fsfreeze -u /data 2>/dev/null || true
"""
    b = record(
        "review-hooks-slow-pre",
        boot(tmp_path / "vm", scenario, disks, commands=cmds, files={"slow.sh": SLOW}),
    )
    assert b.rc_of("assemble") == 0, b.explain("assemble")
    assert b.rc_of("freeze") == 0, b.explain("freeze")
    assert b.rc_of("thaw") == 0, b.explain("thaw")
    # The post hook ran after the pre hook, and /data is writable once the thaw is done.
    assert b.text("hooklog.final").split("\n")[:2] == ["pre slow", "post slow"], b.text(
        "hooklog.final"
    )
    assert b.text("after").strip() == "yes", (b.json_of("freeze"), b.json_of("thaw"))
