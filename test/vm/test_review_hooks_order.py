"""Review (second) of issue 24 on a real kernel: the post hook must run after the pre hook, never
while it still runs. freeze.sh runs the pre hook under timeout(1) with the lock's descriptor
closed (run_hook ... 9>&-), and the lock file is unlinked by its holders (thaw.sh and the guard
`rm -f "$state.lock"` while they hold it), so "the lock waits for a freeze still in its pre hook"
(thaw.sh) does not hold in two cases:

1. The freeze command is cancelled or times out while its pre hook runs. The SSM agent ends a
   command by SIGKILL to the command's process group: `syscall.Kill(-process.Pid,
   syscall.SIGKILL)` in aws/amazon-ssm-agent agent/executers/executers_unix.go (killProcess,
   with prepareProcess's Setpgid), which CancelCommand and the step's timeoutSeconds both use.
   GNU timeout(1) puts itself and the hook in a process group of their own (setpgid(0, 0) unless
   --foreground), so the hook lives on; freeze.sh is dead and its lock free. The workflow's
   failure path (finish.explain_failure) then sends thaw with the run's token: thaw takes the
   lock at once, stops the guard and runs the post hook while the pre hook still runs. The pre
   hook finishes after its post hook: a site's pause/resume pair leaves the application paused,
   and nothing owes it anything any more (guard stopped, record claimed).
2. A guard that fires (no thaw came) holds the lock while its post hook runs, then unlinks the
   lock file. A freeze of the next backup that waited on the lock meanwhile then holds the lock
   of an unlinked file; its guard and its thaw open a new one. A thaw that comes during that
   freeze's pre hook does not wait: it stops the guard and runs the post hook during the pre
   hook, and the freeze fails with GuardFailed.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_assemble import assemble_params
from test_freeze import MINE, OTHER
from vmlib import Commands, boot

from conftest import ArraySet, record

pytestmark = pytest.mark.vm

# `hook.sh WHO PHASE` (run_hook appends the phase): logs its start and end; slowpre's pre phase
# takes 10 s, slowpost's post phase 10 s.
HOOK = r"""#!/bin/bash
who=$1 phase=$2
echo "$phase $who start" >>/work/hooklog
case $who-$phase in
  slowpre-pre) sleep 10 ;;
  slowpost-post) sleep 10 ;;
esac
echo "$phase $who end" >>/work/hooklog
"""


def _order(log: str, who: str) -> list[str]:
    return [line for line in log.splitlines() if line.endswith(("start", "end")) and who in line]


def test_a_freeze_cancelled_during_its_pre_hook_then_thawed_runs_the_post_hook_after_the_pre(
    raid0_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    disks = raid0_set.copies(tmp_path / "disks", rng)
    cmds = Commands()
    assemble = assemble_params(disks, raid0_set.uuid, persist="false")
    base = {"MountPoint": "/data", "FreezeToken": MINE, "HookSeconds": "30"}
    hooks = {"PreSnapshot": "/work/hook.sh slowpre", "PostSnapshot": "/work/hook.sh slowpre"}
    # Rendered as SendCommand would be; started in the background (ssm_start) below.
    cmds.ssm("freeze", "freeze", **base, **hooks, MaxFreezeSeconds="60")
    scenario = f"""
chmod 0755 /work/hook.sh
{cmds.ssm("assemble", "assemble", **assemble)}
: >/work/hooklog
ssm_start freeze
until grep -qx "pre slowpre start" /work/hooklog; do sleep 0.1; done
sleep 1
# CancelCommand (or the step's timeoutSeconds): the agent SIGKILLs the command's process group.
kill -KILL -- "-$(cat /work/freeze.pgid)"
sleep 0.5
# The run's failure path thaws with its token.
{cmds.ssm("thaw", "thaw", **base, PostSnapshot=hooks["PostSnapshot"])}
sleep 15
cp /work/hooklog /work/hooklog.final
"""
    b = record(
        "review-hooks-order-cancel",
        boot(tmp_path / "vm", scenario, disks, commands=cmds, files={"hook.sh": HOOK}),
    )
    assert b.rc_of("assemble") == 0, b.explain("assemble")
    assert b.rc_of("thaw") == 0, b.explain("thaw")
    log = b.text("hooklog.final")
    # The post hook ran once, and only after the pre hook had ended.
    assert _order(log, "slowpre") == [
        "pre slowpre start",
        "pre slowpre end",
        "post slowpre start",
        "post slowpre end",
    ], (log, b.json_of("thaw"))


def test_a_thaw_during_the_pre_hook_waits_for_the_freeze_after_a_guard_fired_before_it(
    raid0_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    disks = raid0_set.copies(tmp_path / "disks", rng)
    cmds = Commands()
    assemble = assemble_params(disks, raid0_set.uuid, persist="false")
    first = {
        "MountPoint": "/data",
        "FreezeToken": OTHER,
        "HookSeconds": "30",
        "MaxFreezeSeconds": "3",
        "PreSnapshot": "/work/hook.sh slowpost",
        "PostSnapshot": "/work/hook.sh slowpost",
    }
    second = {
        "MountPoint": "/data",
        "FreezeToken": MINE,
        "HookSeconds": "30",
        "MaxFreezeSeconds": "120",
        "PreSnapshot": "/work/hook.sh slowpre",
        "PostSnapshot": "/work/hook.sh slowpre",
    }
    thaw_params = {k: v for k, v in second.items() if k != "PreSnapshot"}
    thaw_params.pop("MaxFreezeSeconds")
    thaw = cmds.ssm("thaw", "thaw", **thaw_params)
    cmds.ssm("second", "freeze", **second)
    scenario = f"""
chmod 0755 /work/hook.sh
{cmds.ssm("assemble", "assemble", **assemble)}
: >/work/hooklog
# A backup whose workflow is gone: no thaw comes; its guard fires after 3 s and runs its post
# hook (10 s) holding the lock.
{cmds.ssm("first", "freeze", **first)}
until grep -qx "post slowpost start" /work/hooklog; do sleep 0.1; done
# The next backup's freeze waits for that lock, then runs its pre hook (10 s).
ssm_start second
until grep -qx "pre slowpre start" /work/hooklog; do sleep 0.1; done
sleep 1
# Its thaw comes during the pre hook (its run's failure path): it must wait for the freeze.
{thaw}
wait "$(cat /work/second.pgid)"; echo "$?" >/work/second.rc
sleep 1
cp /work/hooklog /work/hooklog.final
"""
    b = record(
        "review-hooks-order-unlinked-lock",
        boot(tmp_path / "vm", scenario, disks, commands=cmds, files={"hook.sh": HOOK}),
    )
    assert b.rc_of("assemble") == 0, b.explain("assemble")
    assert b.rc_of("first") == 0, b.explain("first")
    log = b.text("hooklog.final")
    # The guard ran the first backup's post hook.
    assert _order(log, "slowpost")[-2:] == ["post slowpost start", "post slowpost end"], log
    # The second freeze froze /data (the thaw waited for it) and the thaw then let go.
    assert b.rc_of("second") == 0, (b.explain("second"), log)
    assert b.json_of("second")["frozen"] is True
    assert b.rc_of("thaw") == 0, b.explain("thaw")
    assert _order(log, "slowpre") == [
        "pre slowpre start",
        "pre slowpre end",
        "post slowpre start",
        "post slowpre end",
    ], log
