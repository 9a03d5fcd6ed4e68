"""The freezes of one run (one token) on two md arrays keep the run's order on a real kernel, as a
backup with takeWith and a hooked array does it: /data (its pre hook holds the application) is
frozen first, /logs second, and the thaws go in reverse order.

1. The caller dies with both frozen: /logs' guard fires first (freeze.sh capped its deadline 2 s
   before /data's, though it asked for 300 s), and /data's guard runs the post hook only after
   /logs is thawed.
2. /logs' thaw never comes (it failed) and /data's thaw is sent at once: the thaw waits on the
   instance for /logs' guard before it runs the post hook.
3. A second freeze that would have less than 10 s before the first one's guard is refused
   (FreezeWindowClosed) and leaves its filesystem as it was.
4. So is one that comes after the first one's guard fired (its state gone, the run's record
   of it kept).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_freeze_together import _deadline
from vmlib import Boot, Commands, blank_disk, boot, new_volume_id

from conftest import record

pytestmark = pytest.mark.vm

DIES = "d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4"
EARLY = "e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5"
CLOSED = "f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6"
LATE = "a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7"
# Room for the second freeze: a command takes a few seconds on a busy test machine.
FIRST_SECONDS = 40

# `hook.sh WHO PHASE`: logs when each phase starts (epoch seconds with fractions).
HOOK = r"""#!/bin/bash
echo "$2 $1 $(date +%s.%N)" >>/work/hooklog
"""


def _hooked(token: str) -> dict[str, str]:
    return {
        "MountPoint": "/data",
        "FreezeToken": token,
        "MaxFreezeSeconds": str(FIRST_SECONDS),
        "HookSeconds": "30",
        "PreSnapshot": f"/work/hook.sh {token[:4]}",
        "PostSnapshot": f"/work/hook.sh {token[:4]}",
    }


def _second(token: str) -> dict[str, str]:
    return {"MountPoint": "/logs", "FreezeToken": token, "MaxFreezeSeconds": "300"}


def _post_started(b: Boot, token: str) -> float:
    (line,) = [x for x in b.text("hooklog").splitlines() if x.startswith(f"post {token[:4]} ")]
    return float(line.split()[-1])


def test_one_runs_guards_thaw_in_reverse_order_and_the_post_hook_waits_for_the_others(
    tmp_path: Path, rng: random.Random
) -> None:
    disks = [blank_disk(tmp_path / f"d{i}.img", 48, new_volume_id(rng)) for i in range(4)]
    data, logs = (
        " ".join(f"$(by_id {d.serial})" for d in disks[:2]),
        " ".join(f"$(by_id {d.serial})" for d in disks[2:]),
    )
    cmds = Commands()
    hooked = _hooked(DIES)
    thaw_data = {k: v for k, v in _hooked(EARLY).items() if k != "PreSnapshot"}
    scenario = f"""
set -e
chmod 0755 /work/hook.sh
mdadm --create /dev/md0 --run --assume-clean --level=0 --chunk=64 --raid-devices=2 \\
  --metadata=1.2 --name=db1 --homehost=srchost {data}
mdadm --create /dev/md1 --run --assume-clean --level=1 --raid-devices=2 \\
  --metadata=1.2 --name=logs --homehost=srchost {logs}
mkfs.ext4 -q -F /dev/md0 && mkfs.ext4 -q -F /dev/md1
mkdir -p /data /logs && mount /dev/md0 /data && mount /dev/md1 /logs
: >/work/hooklog
set +e

# probe NAME DIR: a write into DIR in the background that records when it got through.
probe() {{
  (dd if=/dev/zero of="$2/$1" bs=4k count=1 conv=fsync status=none
   date +%s.%N >"/work/$1.done") &
}}

# 1. The caller dies once both are frozen: no thaw comes.
setsid bash -c '. /work/lib.sh
  {cmds.ssm("dies_data", "freeze", **hooked)}
  {cmds.ssm("dies_logs", "freeze", **_second(DIES))}
  sleep 600' &
caller=$!
while [ ! -f /work/dies_logs.rc ]; do sleep 0.05; done
kill -KILL -- -$caller
probe dies_logs /logs
until grep -q "^post {DIES[:4]} " /work/hooklog; do sleep 0.2; done
wait
# The guard ends once its post hook has: given 5 s.
for _ in $(seq 50); do ls /run/raidsnap/*.guard >/dev/null 2>&1 || break; sleep 0.1; done
ls -A /run/raidsnap >/work/dies.state 2>&1

# 2. /logs' thaw failed (never sent); /data's thaw, which runs the post hook, comes at once.
{cmds.ssm("early_data", "freeze", **_hooked(EARLY))}
{cmds.ssm("early_logs", "freeze", **_second(EARLY))}
probe early_logs /logs
{cmds.ssm("early_thaw_data", "thaw", **thaw_data)}
wait
ls -A /run/raidsnap >/work/early.state 2>&1

# 3. The first freeze's guard fires in 8 s: a second freeze of the run has no room left.
{cmds.ssm("closed_data", "freeze", MountPoint="/data", FreezeToken=CLOSED, MaxFreezeSeconds="8")}
{cmds.ssm("closed_logs", "freeze", **_second(CLOSED))}
probe closed_logs /logs
sleep 2
if [ -f /work/closed_logs.done ]; then echo no; else echo yes; fi >/work/closed_logs.blocked
{cmds.ssm("closed_thaw_data", "thaw", MountPoint="/data", FreezeToken=CLOSED)}
wait
ls -A /run/raidsnap >/work/closed.state 2>&1

# 4. A freeze of the run that comes after the first one's guard fired (a slow freeze before it):
#    the first one's state is gone, its record is not.
{cmds.ssm("late_data", "freeze", MountPoint="/data", FreezeToken=LATE, MaxFreezeSeconds="3")}
sleep 5
{cmds.ssm("late_logs", "freeze", **_second(LATE))}
probe late_logs /logs
sleep 2
if [ -f /work/late_logs.done ]; then echo no; else echo yes; fi >/work/late_logs.blocked
wait
"""
    b = record(
        "freeze group order",
        boot(tmp_path / "vm", scenario, disks, commands=cmds, files={"hook.sh": HOOK}),
    )
    assert b.rc == 0, b.text("scenario.stderr")[-3000:]

    # 1. /logs' deadline was capped before /data's; its guard thawed it first, and /data's
    #    guard ran the post hook after that
    for name in ("dies_data", "dies_logs"):
        assert b.rc_of(name) == 0, b.explain(name)
    data_deadline, logs_deadline = _deadline(b, "dies_data"), _deadline(b, "dies_logs")
    assert logs_deadline <= data_deadline - 2, (logs_deadline, data_deadline)
    assert logs_deadline < b.json_of("dies_logs")["frozenAt"] + 300
    logs_thawed = float(b.text("dies_logs.done"))
    post = _post_started(b, DIES)
    print(
        f"/logs thawed {logs_thawed - logs_deadline:+.2f}s from its deadline, the post hook ran "
        f"{post - logs_thawed:+.2f}s after it"
    )
    assert logs_deadline - 1 < logs_thawed < logs_deadline + 4
    assert post > logs_thawed
    assert _state_left(b.text("dies.state")) == []

    # 2. the thaw sent at once waited for /logs' guard before the post hook
    assert b.rc_of("early_thaw_data") == 0, b.explain("early_thaw_data")
    logs_thawed = float(b.text("early_logs.done"))
    post = _post_started(b, EARLY)
    print(f"the post hook ran {post - logs_thawed:+.2f}s after /logs' guard thawed it")
    assert post > logs_thawed
    assert logs_thawed > _deadline(b, "early_logs") - 1
    assert b.json_of("early_thaw_data")["postSnapshot"] == "ok"
    assert "waited" in b.text("early_thaw_data.stderr"), b.explain("early_thaw_data")
    assert _state_left(b.text("early.state")) == []

    # 3. refused with the named error; /logs was never frozen
    assert b.rc_of("closed_data") == 0, b.explain("closed_data")
    assert b.rc_of("closed_logs") == 1, b.explain("closed_logs")
    said = b.json_of("closed_logs")
    assert said["error"] == "FreezeWindowClosed", said
    assert "raise MaxFreezeSeconds or take fewer arrays together" in said["message"]
    assert b.text("closed_logs.blocked").strip() == "no"
    assert b.rc_of("closed_thaw_data") == 0, b.explain("closed_thaw_data")
    assert _state_left(b.text("closed.state")) == []

    # 4. refused after the first one ended, though no other freeze of the run is in place
    assert b.rc_of("late_data") == 0, b.explain("late_data")
    assert b.rc_of("late_logs") == 1, b.explain("late_logs")
    assert b.json_of("late_logs")["error"] == "FreezeWindowClosed"
    assert b.text("late_logs.blocked").strip() == "no"


def _state_left(text: str) -> list[str]:
    """What the runs left in the state directory, but the lock files and the runs' records of
    their first freeze (kept by design) and the hooks' directory."""
    return [
        f
        for f in text.split()
        if not f.endswith(".lock") and not f.startswith("group-") and f != "hooks"
    ]
