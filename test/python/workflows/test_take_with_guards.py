"""The freeze guards of a group taken together (takeWith) keep the run's order: the array with
hooks is frozen first and thawed last, and no guard or failed thaw lets its post hook run while
another filesystem of the run is still frozen.

- Each later freeze's guard fires before the first one's (freeze.sh caps its deadline 2 s before
  it), so if the workflow dies the hooked array's guard, which runs the post hook, comes last.
- A group too slow to fit in the hooked array's MaxFreezeSeconds is refused at the freeze that no
  longer fits (FreezeWindowClosed), before any snapshot; every filesystem is thawed before the
  post hook.
- A thaw that fails on the way out of a run that took its sets leaves that filesystem to its
  guard: the thaw that runs the post hook waits on the instance until that guard fired.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from test_backup_together import ran_commands, reported_deadline, two
from test_review_take_with_many import configure_hooks, many, sent

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation

RELEASE = "/usr/local/sbin/db-hook --release"
# freeze.sh: every later freeze of a run ends this long before the first one.
GAP = timedelta(seconds=2)


def _freeze_bounds(run: Any) -> dict[str, datetime]:
    """Mount point -> frozenUntil, as the run's last freeze step carried them."""
    outputs = [
        json.loads(e["stateExitedEventDetails"]["output"])
        for e in run.events
        if e["type"] == "TaskStateExited" and e["stateExitedEventDetails"]["name"] == "PollFreeze"
    ]
    last = outputs[-1]["freeze"]
    where = {"db1": "/data"} | {f"a{i}": f"/a{i}" for i in range(8)}
    return {
        where[c["array"]]: datetime.fromisoformat(c["frozenUntil"].replace("Z", "+00:00"))
        for c in [*last["earlier"], last]
    }


def _before_post_hook(log: list[str]) -> list[str]:
    """What the instance did before the first post hook ran."""
    first = next(i for i, e in enumerate(log) if e.startswith("post-snapshot"))
    return log[:first]


def hooked_nine(emu: Emulation, monkeypatch: pytest.MonkeyPatch, fsfreeze_seconds: float) -> Any:
    """db1 with hooks and 8 more arrays of its instance, whose fsfreeze -f takes this long:
    (db1's fixture, the other arrays' names)."""
    fx, names = many(emu, 8)
    configure_hooks(emu)
    monkeypatch.setattr(emu.hosts, "fsfreeze_seconds", fsfreeze_seconds)
    return fx, names


def test_each_later_freeze_ends_before_the_first_one(
    emu: Emulation, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN db1 with hooks and 8 more arrays of its instance, whose freezes take a second each
    fx, names = hooked_nine(emu, monkeypatch, 1.0)
    # (SSM's RequestedDateTime has fractions of a second; freeze.sh's deadline whole seconds)
    emu.clock.advance(1.7 - emu.clock.now().microsecond / 1e6)
    # WHEN db1 is backed up with them, fsfreeze-consistent
    run = emu.run("backup", {"array": "db1", "takeWith": names, "consistency": "fsfreeze"})
    # THEN the run took every set
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    # AND every other guard fires 2 s or more before db1's, which runs its post hook
    freezes = ran_commands(fx.instance_id, "raidsnap-freeze")
    order = [mount for mount, _, _ in freezes]
    assert order[0] == "/data" and len(order) == 9, order
    deadlines = [reported_deadline(line) for _, line, _ in freezes]
    late = [(m, d) for m, d in zip(order[1:], deadlines[1:], strict=True) if d > deadlines[0] - GAP]
    assert not late, (deadlines[0], late)
    # AND the bound the run labels each set by (frozenUntil: the guard certainly holds until
    # then) is never after the deadline the instance set, whole seconds included
    by_mount = {mount: reported_deadline(line) for mount, line, _ in freezes}
    bounds = _freeze_bounds(run)
    assert len(bounds) == 9
    for mount, until in bounds.items():
        assert until <= by_mount[mount], (mount, until, by_mount[mount])
    # AND every set got what it asked for (db1's pre hook holds the application), each
    # snapshot started before its own guard's deadline
    labels = [run.output["consistency"], *(p["consistency"] for p in run.output["together"])]
    assert labels == ["application"] + ["fsfreeze"] * 8, labels


def test_a_group_too_slow_for_the_hooked_arrays_bound_is_refused_before_any_snapshot(
    emu: Emulation, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN db1 with hooks and 8 more arrays, whose freezes take 8 s each (fsfreeze -f writes
    # the dirty data out first): all 9 do not fit in db1's 60 s
    fx, names = hooked_nine(emu, monkeypatch, 8.0)
    # WHEN db1 is backed up with them
    run = emu.run("backup", {"array": "db1", "takeWith": names, "consistency": "fsfreeze"})
    # THEN the freeze that no longer fits is refused, and the run fails before any snapshot
    # with a cause that says what to change
    assert run.status == "FAILED"
    assert run.error == "CommandFailed", run.cause
    assert "FreezeWindowClosed" in str(run.cause), run.cause
    assert "raise MaxFreezeSeconds or take fewer arrays together" in str(run.cause)
    assert not [c for c in emu.double.calls if c.operation == "CreateSnapshots"]
    # AND every filesystem is thawed, the others before db1's post hook runs
    state = emu.hosts.state(fx.instance_id)
    assert state.frozen == set()
    frozen_ones = [e.removeprefix("freeze ") for e in state.log if e.startswith("freeze ")]
    assert len(frozen_ones) >= 2
    before = _before_post_hook(state.log)
    thawed = {e.split()[-1] for e in before if e.startswith(("thaw ", "guard thawed "))}
    assert thawed >= set(frozen_ones) - {"/data"}, before
    assert (
        state.log.count(f"post-snapshot {RELEASE}")
        + state.log.count(f"post-snapshot {RELEASE} (guard)")
        == 1
    ), state.log


LOGS_HOOKS = {
    "logs": {
        "timeoutSeconds": 20,
        "preSnapshot": "/usr/local/sbin/db-hook --hold",
        "postSnapshot": RELEASE,
    }
}


def test_after_a_failed_thaw_the_post_hook_waits_for_that_filesystems_guard(
    emu: Emulation,
) -> None:
    # GIVEN db1 (/data) and logs (/logs, hooked), fsfreeze; fsfreeze -u of /data fails
    fx, _, _ = two(emu)
    assert emu.router is not None
    for fn in emu.router.functions.values():
        if "HOOKS_BY_ARRAY" in fn.environment:
            fn.environment["HOOKS_BY_ARRAY"] = json.dumps(LOGS_HOOKS)
    line = {"ok": False, "error": "ThawFailed", "message": "fsfreeze -u /data failed: I/O error"}
    emu.hosts.fail_next(
        "thaw", CommandOutcome(status="Failed", stdout=json.dumps(line), exit_code=1)
    )
    # WHEN db1 is backed up with logs
    run = emu.run("backup", {"array": "db1", "takeWith": ["logs"], "consistency": "fsfreeze"})
    # THEN the sets are taken
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    thaws = sent(emu, "raidsnap-thaw")
    assert [t.params["Parameters"]["MountPoint"][0] for t in thaws] == ["/data", "/logs"]
    # AND logs' post hook ran only once /data's guard had thawed it, at its deadline
    state = emu.hosts.state(fx.instance_id)
    assert state.frozen == set()
    assert "guard thawed /data" in _before_post_hook(state.log), state.log
    data_deadline = next(
        reported_deadline(line)
        for mount, line, _ in ran_commands(fx.instance_id, "raidsnap-freeze")
        if mount == "/data"
    )
    (ended,) = [
        e for mount, _, e in ran_commands(fx.instance_id, "raidsnap-thaw") if mount == "/logs"
    ]
    assert ended >= data_deadline, (ended, data_deadline)
    # AND the run's notes say so
    notes = " ".join(map(str, run.output.get("notes") or []))
    assert "the thaw of /data failed" in notes, notes
    assert "the post hook of logs ran only after that" in notes, notes
