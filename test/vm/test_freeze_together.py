"""Two md arrays of one guest frozen around one point in time, as a backup with takeWith and
fsfreeze does it (lambdas/raidsnap/workflows/backup/freezes.py): the freeze document once per
mount point in array name order (/data of db1, then /logs of logs), the thaw document once per
mount point in reverse order, with one token for the run.

Three runs on one boot: a run that succeeds leaves both thawed and both guards gone; a run whose
second freeze fails (another tool holds /logs frozen) leaves /data thawed by the failure path's
thaws and the other tool's freeze as it was; a run whose caller dies with both frozen is thawed
by each mount point's own guard at its own deadline, the second one frozen first."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

import pytest
from vmlib import Boot, Commands, blank_disk, boot, new_volume_id

from conftest import record

pytestmark = pytest.mark.vm

RUN_OK = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"
RUN_FAILS = "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2"
RUN_DIES = "c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3"
GUARD_SECONDS = 30
MOUNTS = {"data": "/data", "logs": "/logs"}


def _freeze(cmds: Commands, name: str, mount: str, token: str, seconds: int = 300) -> str:
    return cmds.ssm(
        name, "freeze", MountPoint=mount, MaxFreezeSeconds=str(seconds), FreezeToken=token
    )


def _thaw(cmds: Commands, name: str, mount: str, token: str) -> str:
    # The backup's thaw sends MaxFreezeSeconds too (one parameter set for both documents).
    return cmds.ssm(name, "thaw", MountPoint=mount, MaxFreezeSeconds="300", FreezeToken=token)


def _deadline(b: Boot, name: str) -> float:
    said = datetime.strptime(b.json_of(name)["thawDeadline"], "%Y-%m-%dT%H:%M:%SZ")
    return said.replace(tzinfo=UTC).timestamp()


def test_two_md_arrays_are_frozen_in_order_and_always_both_thawed(
    tmp_path: Path, rng: random.Random
) -> None:
    disks = [blank_disk(tmp_path / f"d{i}.img", 48, new_volume_id(rng)) for i in range(4)]
    db1, logs = (
        " ".join(f"$(by_id {d.serial})" for d in disks[:2]),
        " ".join(f"$(by_id {d.serial})" for d in disks[2:]),
    )
    cmds = Commands()
    scenario = f"""
set -e
mdadm --create /dev/md0 --run --assume-clean --level=0 --chunk=64 --raid-devices=2 \\
  --metadata=1.2 --name=db1 --homehost=srchost {db1}
mdadm --create /dev/md1 --run --assume-clean --level=1 --raid-devices=2 \\
  --metadata=1.2 --name=logs --homehost=srchost {logs}
mkfs.ext4 -q -F /dev/md0 && mkfs.ext4 -q -F /dev/md1
mkdir -p /data /logs && mount /dev/md0 /data && mount /dev/md1 /logs
set +e

# probe NAME DIR: a write into DIR in the background; after 2 s, is it still waiting?
probe() {{
  (dd if=/dev/zero of="$2/$1" bs=4k count=1 conv=fsync status=none
   date +%s.%N >"/work/$1.done") &
  sleep 2
  if [ -f "/work/$1.done" ]; then echo no; else echo yes; fi >"/work/$1.blocked"
}}
# gone NAME: is the guard the freeze NAME reported still running (given 5 s to end once its
# mount point is thawed: a guard that fired exits right after fsfreeze -u)?
gone() {{
  pid=$(sed -n 's/.*"guardPid":\\([0-9]*\\).*/\\1/p' "/work/$1.stdout")
  for _ in $(seq 50); do [ -n "$pid" ] && [ -d "/proc/$pid" ] || break; sleep 0.1; done
  if [ -n "$pid" ] && [ -d "/proc/$pid" ]; then echo alive; else echo gone; fi >"/work/$1.guard"
}}

# 1. The run succeeds: freeze /data, freeze /logs, (the snapshots), thaw /logs, thaw /data.
{_freeze(cmds, "ok_freeze_data", "/data", RUN_OK)}
{_freeze(cmds, "ok_freeze_logs", "/logs", RUN_OK)}
probe ok_data /data; probe ok_logs /logs
{_thaw(cmds, "ok_thaw_logs", "/logs", RUN_OK)}
{_thaw(cmds, "ok_thaw_data", "/data", RUN_OK)}
wait
gone ok_freeze_data; gone ok_freeze_logs
ls -A /run/raidsnap >/work/ok.state 2>&1

# 2. Another tool holds /logs frozen: /data freezes, /logs refuses, and the failure path thaws
#    every mount point of the run in reverse order (/logs: nothing of ours; /data: thawed).
fsfreeze -f /logs
{_freeze(cmds, "fail_freeze_data", "/data", RUN_FAILS)}
{_freeze(cmds, "fail_freeze_logs", "/logs", RUN_FAILS)}
{_thaw(cmds, "fail_thaw_logs", "/logs", RUN_FAILS)}
{_thaw(cmds, "fail_thaw_data", "/data", RUN_FAILS)}
probe fail_data /data; probe fail_logs /logs
gone fail_freeze_data
fsfreeze -u /logs
wait
ls -A /run/raidsnap >/work/fail.state 2>&1

# 3. The caller dies once both are frozen (the workflow is gone): each guard thaws its own.
setsid bash -c '. /work/lib.sh
  {_freeze(cmds, "die_freeze_data", "/data", RUN_DIES, GUARD_SECONDS)}
  {_freeze(cmds, "die_freeze_logs", "/logs", RUN_DIES, GUARD_SECONDS)}
  sleep 600' &
caller=$!
while [ ! -f /work/die_freeze_logs.rc ]; do sleep 0.05; done
kill -KILL -- -$caller
probe die_data /data; probe die_logs /logs
wait
gone die_freeze_data; gone die_freeze_logs
ls -A /run/raidsnap >/work/die.state 2>&1
echo after >/data/after && echo after >/logs/after && cat /data/after /logs/after >/work/after
"""
    b = record("freeze two arrays", boot(tmp_path / "vm", scenario, disks, commands=cmds))
    assert b.rc == 0, b.text("scenario.stderr")[-3000:]

    # 1. both froze (writes waited), both thawed by the run's thaws, guards and state gone
    for name in ("ok_freeze_data", "ok_freeze_logs", "ok_thaw_logs", "ok_thaw_data"):
        assert b.rc_of(name) == 0, b.explain(name)
    assert b.json_of("ok_freeze_data")["frozen"] is True
    assert b.json_of("ok_freeze_logs")["frozen"] is True
    assert b.text("ok_data.blocked").strip() == "yes", "/data must be frozen with /logs"
    assert b.text("ok_logs.blocked").strip() == "yes", "/logs must be frozen"
    for name in ("ok_thaw_logs", "ok_thaw_data"):
        thawed = b.json_of(name)
        assert thawed["wasFrozen"] is True and thawed["guardStopped"] is True, thawed
    assert b.text("ok_freeze_data.guard").strip() == "gone"
    assert b.text("ok_freeze_logs.guard").strip() == "gone"
    assert _state_left(b.text("ok.state")) == []

    # 2. the second freeze failed; /data is thawed, the other tool's /logs freeze untouched
    assert b.rc_of("fail_freeze_data") == 0, b.explain("fail_freeze_data")
    assert b.rc_of("fail_freeze_logs") == 1
    assert b.json_of("fail_freeze_logs")["error"] == "AlreadyFrozen"
    assert b.rc_of("fail_thaw_logs") == 0, b.explain("fail_thaw_logs")
    assert b.json_of("fail_thaw_logs")["wasFrozen"] is False
    assert b.json_of("fail_thaw_data")["wasFrozen"] is True
    assert b.text("fail_data.blocked").strip() == "no", "the failure path must thaw /data"
    assert b.text("fail_logs.blocked").strip() == "yes", "another tool's freeze stays"
    assert b.text("fail_freeze_data.guard").strip() == "gone"
    assert _state_left(b.text("fail.state")) == []

    # 3. each guard thawed its own mount point at its own deadline, /logs' first
    for name in ("die_freeze_data", "die_freeze_logs"):
        assert b.rc_of(name) == 0, b.explain(name)
        assert b.json_of(name)["frozen"] is True
    assert b.text("die_data.blocked").strip() == "yes"
    assert b.text("die_logs.blocked").strip() == "yes"
    # /logs, frozen second, is capped before /data (freeze.sh: the run's later freezes end first)
    assert _deadline(b, "die_freeze_logs") <= _deadline(b, "die_freeze_data") - 2
    for mount, name in (("data", "die_freeze_data"), ("logs", "die_freeze_logs")):
        done = float(b.text(f"die_{mount}.done"))
        deadline = _deadline(b, name)
        print(f"/{mount} thawed {done - deadline:+.2f}s from its guard's deadline")
        assert deadline - 1 < done < deadline + 4, MOUNTS[mount]
    assert b.text("die_freeze_data.guard").strip() == "gone"
    assert b.text("die_freeze_logs.guard").strip() == "gone"
    assert _state_left(b.text("die.state")) == []
    assert b.text("after").split() == ["after", "after"]


def _state_left(text: str) -> list[str]:
    """What the runs left in the state directory, but the lock files: they stay by design
    (lib/freeze_guard.sh: a lock file unlinked while held would let the next opener lock
    another file), nor the runs' records of their first freeze (group-<token>, for an hour)."""
    return [f for f in text.split() if not f.endswith(".lock") and not f.startswith("group-")]
