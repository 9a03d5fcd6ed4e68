"""Application hooks around the freeze, on a real kernel. The application is a STAND-IN: a process
that holds an flock on a file while "the database is held" (test_postgresql.py runs the
ready-made PostgreSQL hook with a real server). It proves the protocol the ready-made hooks rely on:
the pre hook returns while its session still holds the lock, the lock is held through the
snapshot instant, the post hook lets go; a pre hook that hangs fails the freeze by name
(HookFailed) and the post hook still runs; with no thaw, the guard runs the post hook;
Freeze=false runs the hooks alone."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_assemble import assemble_params
from test_freeze import MINE
from vmlib import Commands, boot

from conftest import ArraySet, record

pytestmark = pytest.mark.vm

# The stand-in hook: `standin.sh MODE PHASE` (run_hook appends the phase). MODE hold: pre starts
# a session that holds /work/app.lock until post asks it to let go; hang: pre never returns.
STANDIN = r"""#!/bin/bash
set -u
mode=$1 phase=$2
echo "$phase $mode" >>/work/hooklog
case $mode-$phase in
  hold-pre)
    rm -f /work/release /work/session
    setsid bash -c 'exec 9>/work/app.lock; flock 9; echo held >/work/session
      while [ ! -e /work/release ]; do sleep 0.1; done; echo released >>/work/session' \
      </dev/null >/dev/null 2>&1 &
    for _ in $(seq 1 50); do grep -qx held /work/session 2>/dev/null && exit 0; sleep 0.1; done
    exit 1 ;;
  hold-post|hang-post)
    [ -e /work/session ] || exit 0
    touch /work/release
    for _ in $(seq 1 50); do grep -qx released /work/session && exit 0; sleep 0.1; done
    exit 1 ;;
  hang-pre) sleep 1000 ;;
esac
"""


def test_hooks_hold_the_application_across_the_snapshot_and_always_let_go(
    raid0_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    disks = raid0_set.copies(tmp_path / "disks", rng)
    cmds = Commands()
    assemble = assemble_params(disks, raid0_set.uuid, persist="false")
    hold = {"PreSnapshot": "/work/standin.sh hold", "PostSnapshot": "/work/standin.sh hold"}
    base = {"MountPoint": "/data", "FreezeToken": MINE, "HookSeconds": "5"}
    hang = {
        **base,
        "PreSnapshot": "/work/standin.sh hang",
        "PostSnapshot": "/work/standin.sh hang",
        "HookSeconds": "3",
        "MaxFreezeSeconds": "60",
    }
    scenario = f"""
chmod 0755 /work/standin.sh
locked() {{ if flock -n /work/app.lock true; then echo free; else echo held; fi; }}
# A write to a frozen filesystem blocks until the thaw (no signal ends it): look after 1 s.
writable() {{
  # (its output goes elsewhere: $(writable) would otherwise wait for the blocked write)
  rm -f /work/wrote; (touch /data/probe && touch /work/wrote) </dev/null >/dev/null 2>&1 &
  sleep 1; if [ -e /work/wrote ]; then echo yes; else echo no; fi
}}
{cmds.ssm("assemble", "assemble", **assemble)}

# 1. pre, freeze, (the snapshot instant), thaw, post
{cmds.ssm("freeze1", "freeze", **base, **hold, MaxFreezeSeconds="60")}
echo "$(locked) $(writable)" >/work/during1
{cmds.ssm("thaw1", "thaw", **base, PostSnapshot=hold["PostSnapshot"])}
echo "$(locked) $(writable)" >/work/after1

# 2. a pre hook that hangs: HookFailed, nothing frozen, the post hook ran
: >/work/hooklog
{cmds.ssm("freeze2", "freeze", **hang)}
echo "$(writable)" >/work/after2
cp /work/hooklog /work/hooklog2

# 3. no thaw comes: the guard thaws and runs the post hook
: >/work/hooklog
{cmds.ssm("freeze3", "freeze", **base, **hold, MaxFreezeSeconds="8")}
echo "$(locked) $(writable)" >/work/during3
sleep 12
echo "$(locked) $(writable)" >/work/after3
cp /work/hooklog /work/hooklog3
{cmds.ssm("thaw3", "thaw", **base, PostSnapshot=hold["PostSnapshot"])}

# 4. hooks alone (crash consistency with the application's help): nothing frozen
{cmds.ssm("freeze4", "freeze", **base, **hold, Freeze="false", MaxFreezeSeconds="60")}
echo "$(locked) $(writable)" >/work/during4
{cmds.ssm("thaw4", "thaw", **base, PostSnapshot=hold["PostSnapshot"])}
echo "$(locked) $(writable)" >/work/after4
"""
    b = record(
        "hooks",
        boot(tmp_path / "vm", scenario, disks, commands=cmds, files={"standin.sh": STANDIN}),
    )
    assert b.rc_of("assemble") == 0, b.explain("assemble")

    assert b.rc_of("freeze1") == 0, b.explain("freeze1")
    f1 = b.json_of("freeze1")
    assert (f1["frozen"], f1["preSnapshot"]) == (True, "ok")
    assert b.text("during1").split() == ["held", "no"]  # the application held, /data frozen
    assert b.rc_of("thaw1") == 0, b.explain("thaw1")
    assert b.json_of("thaw1")["postSnapshot"] == "ok"
    assert b.text("after1").split() == ["free", "yes"]

    assert b.rc_of("freeze2") == 1
    f2 = b.json_of("freeze2")
    assert f2["error"] == "HookFailed" and "did not finish in 3s" in f2["message"], f2
    assert "post-snapshot hook: ok" in f2["message"], f2
    assert b.text("hooklog2").split("\n")[:2] == ["pre hang", "post hang"]
    assert b.text("after2").strip() == "yes"

    assert b.rc_of("freeze3") == 0, b.explain("freeze3")
    assert b.text("during3").split() == ["held", "no"]
    assert b.text("after3").split() == ["free", "yes"]  # the guard thawed and ran post
    assert b.text("hooklog3").split("\n")[:2] == ["pre hold", "post hold"]
    assert b.rc_of("thaw3") == 0 and b.json_of("thaw3")["postSnapshot"] == "none"

    assert b.rc_of("freeze4") == 0, b.explain("freeze4")
    assert b.json_of("freeze4")["frozen"] is False
    assert b.text("during4").split() == ["held", "yes"]
    assert b.json_of("thaw4")["postSnapshot"] == "ok"
    assert b.text("after4").split() == ["free", "yes"]


# Stand-ins for systemd on a guest without it: systemd-run keeps the command it was given (one
# argument per line; the arguments here are paths and words) for the test to run as the timer
# would; systemctl does nothing.
SYSTEMD_RUN = r"""#!/bin/bash
printf '%s\n' "$@" >/work/systemd-run.args
"""
SYSTEMCTL = "#!/bin/bash\nexit 0\n"


def test_the_systemd_timer_guard_thaws_and_runs_the_post_hook_when_the_process_guard_is_gone(
    raid0_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    # GIVEN a freeze with hooks on a host with systemd, WHEN the agent's service restarts (its
    # control group dies: the process guard with it) and no thaw comes, THEN the timer's unit
    # thaws the filesystem AND runs the post hook, once.
    disks = raid0_set.copies(tmp_path / "disks", rng)
    cmds = Commands()
    assemble = assemble_params(disks, raid0_set.uuid, persist="false")
    freeze = {
        "MountPoint": "/data",
        "FreezeToken": MINE,
        "HookSeconds": "5",
        "MaxFreezeSeconds": "600",
        "PreSnapshot": "/work/standin.sh hold",
        "PostSnapshot": "/work/standin.sh hold",
    }
    scenario = f"""
chmod 0755 /work/standin.sh
cp /work/systemd-run /work/systemctl /usr/bin/ && chmod 0755 /usr/bin/systemd-run /usr/bin/systemctl
mkdir -p /run/systemd/system
locked() {{ if flock -n /work/app.lock true; then echo free; else echo held; fi; }}
writable() {{
  rm -f /work/wrote; (touch /data/probe && touch /work/wrote) </dev/null >/dev/null 2>&1 &
  sleep 1; if [ -e /work/wrote ]; then echo yes; else echo no; fi
}}
{cmds.ssm("assemble", "assemble", **assemble)}
: >/work/hooklog
{cmds.ssm("freeze", "freeze", **freeze)}
echo "$(locked) $(writable)" >/work/during
# The agent's control group dies: the process guard with it.
read -r guard _ <"/run/raidsnap/freeze-$(printf %s /data | sha256sum | cut -c1-16)"
kill -KILL -- "-$guard" 2>/dev/null; kill -KILL "$guard" 2>/dev/null || true
sleep 1
echo "$(locked) $(writable)" >/work/orphaned
# The timer fires: systemd runs the unit's command as systemd-run was given it.
mapfile -t unit </work/systemd-run.args
cmd=()
for a in "${{unit[@]}}"; do [[ ${{#cmd[@]}} -gt 0 || $a != --* ]] && cmd+=("$a"); done
"${{cmd[@]}}"; echo "$?" >/work/unit.rc
sleep 1
echo "$(locked) $(writable)" >/work/fired
# A second firing (or the process guard, had it lived) runs nothing more.
"${{cmd[@]}}"
cp /work/hooklog /work/hooklog.final
"""
    b = record(
        "hooks-systemd-guard",
        boot(
            tmp_path / "vm",
            scenario,
            disks,
            commands=cmds,
            files={"standin.sh": STANDIN, "systemd-run": SYSTEMD_RUN, "systemctl": SYSTEMCTL},
        ),
    )
    assert b.rc_of("assemble") == 0, b.explain("assemble")
    assert b.rc_of("freeze") == 0, b.explain("freeze")
    assert b.json_of("freeze")["systemdTimer"], b.json_of("freeze")
    args = b.text("systemd-run.args").split("\n")
    assert "--on-active=600s" in args, args
    assert b.text("during").split() == ["held", "no"]
    assert b.text("orphaned").split() == ["held", "no"]  # nobody left to let go but the timer
    assert b.text("unit.rc").strip() == "0"
    assert b.text("fired").split() == ["free", "yes"]  # thawed, and the post hook let go
    assert b.text("hooklog.final").split("\n")[:3] == ["pre hold", "post hold", ""]
