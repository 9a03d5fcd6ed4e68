"""A newcomer's session with the local world, typed into a real terminal: the world comes up
with db1 backed up, a backup runs, a backup takes db1 and logs at one point in time with both
filesystems frozen, a member is lost, a replace restore starts and is looked at
while it runs, a restore fails and says why and what it undid, and the world goes down.

Each screen is compared with its golden file in golden/terminal/ (ids, times, durations and
ports normalised: terminal.py). After a deliberate change of what the commands print, write
them again with RAIDSNAP_UPDATE_GOLDEN=1 and read the diff."""

from __future__ import annotations

import difflib
import json
import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from terminal import REPO, Normaliser, Shown, Terminal, comparable

from raidsnap_cli.local_state import STATE_FILE, process_start

GOLDEN = Path(__file__).parent / "golden" / "terminal"
UPDATE = os.environ.get("RAIDSNAP_UPDATE_GOLDEN") == "1"
# Fast enough for a test, while each run still takes its emulated minutes.
SPEED = "300"


@pytest.fixture
def terminal(tmp_path: Path, template: Path) -> Iterator[Terminal]:
    """A terminal whose commands keep their local world in tmp_path; the world this test starts
    is ended by its PID at the end, whatever happened."""
    del template  # synthesized before the clock starts
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AWS_", "RAIDSNAP_", "COLUMNS", "LINES", "PYTHON"))
    }
    env.update(
        RAIDSNAP_LOCAL_DIR=str(tmp_path),
        PYTHONPATH=os.pathsep.join(str(REPO / d) for d in ("lambdas", "emulation", "cli")),
        TERM="xterm-256color",
        NO_COLOR="",
    )
    env.pop("NO_COLOR")
    try:
        yield Terminal(env)
    finally:
        _end_world(tmp_path)


def _end_world(state: Path) -> None:
    try:
        world = json.loads((state / STATE_FILE).read_text())
    except OSError:
        return
    pid = int(world["pid"])
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if process_start(pid) != world["processStart"]:
            return
        os.kill(pid, sig)
        deadline = time.monotonic() + 10
        while process_start(pid) == world["processStart"] and time.monotonic() < deadline:
            time.sleep(0.05)


def _world_control(state: Path, name: str) -> dict[str, object]:
    world = json.loads((state / STATE_FILE).read_text())
    request = urllib.request.Request(  # noqa: S310 - the test's own world, on loopback
        f"{world['url']}/_raidsnap/{name}",
        data=b"{}",
        headers={"X-Raidsnap-Token": world["token"]},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
        return dict(json.loads(answer.read()))


def _parked(state: Path, timeout: float = 20) -> None:
    """Wait until every run in the (stopped) world waits for emulated time to move: what a
    command shows now stays so until the clock runs again."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        clock = _world_control(state, "clock")
        if clock["running"] == 0 and int(str(clock["sleeping"])) >= 1:
            return
        time.sleep(0.1)
    raise TimeoutError("the runs never came to rest on the stopped clock")


def _ended(state: Path, timeout: float = 60) -> None:
    """Wait until no run in the (running) world is left: neither running nor waiting for
    emulated time. What a command shows of an ended run is then the same each time."""
    deadline = time.monotonic() + timeout
    quiet = 0
    while time.monotonic() < deadline:
        clock = _world_control(state, "clock")
        quiet = quiet + 1 if clock["running"] == 0 and int(str(clock["sleeping"])) == 0 else 0
        if quiet >= 3:
            return
        time.sleep(0.1)
    raise TimeoutError("the runs never ended on the running clock")


def _check(shown: Shown, name: str, normalise: Normaliser) -> None:
    screen = normalise(f"$ {shown.command}\n{shown.screen}\n[exit {shown.exit_code}]\n")
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(screen)
        return
    want, got = comparable(path.read_text()), comparable(screen)
    diff = "\n".join(difflib.unified_diff(want, got, "golden", "now", lineterm=""))
    assert got == want, f"{name}: the screen changed\n{diff}"


def _execution_name(shown: Shown) -> str:
    arn = next(line for line in shown.screen.splitlines() if line.startswith("arn:aws:states"))
    return arn.rsplit(":", 1)[1]


def test_a_session_with_the_local_world(terminal: Terminal, tmp_path: Path) -> None:
    normalise = Normaliser(tmp_path)

    def step(name: str, *args: str, code: int = 0, timeout: float = 60) -> Shown:
        shown = terminal.run(*args, timeout=timeout)
        print(f"{name}: {shown.seconds:.1f} s")
        assert shown.exit_code == code, shown.screen
        _check(shown, name, normalise)
        return shown

    step("01-up", "local", "up", "--speed", SPEED, timeout=180)
    step("02-backup", "--local", "backup", "db1")
    step(
        "02b-backup-with-logs",
        "--local",
        "backup",
        "db1",
        "--with",
        "logs",
        "--consistency",
        "fsfreeze",
    )
    step("03-break-member", "local", "break", "db1", "--member", "1")
    # Time stops, so that the restore can be looked at mid-way, and shows the same each time.
    step("04-clock-pause", "local", "clock", "--pause")
    started = step(
        "05-restore-replace", "--local", "restore", "db1", "--mode", "replace", "--no-wait"
    )
    name = _execution_name(started)
    _parked(tmp_path)
    step("06-status-while-running", "--local", "status", "--array", "db1")
    step("07-status-of-the-run", "--local", "status", name)
    step("08-clock-resume", "local", "clock", "--resume")
    # Whether the restore is still running when its follow starts would depend on threads:
    # it is let end first, so the follow shows the ended run, the same each time.
    _ended(tmp_path)
    step("09-follow-to-the-end", "--local", "status", name, "--follow")
    step("10-break-assemble", "local", "break", "db1", "--assemble")
    step("11-restore-fails", "--local", "restore", "db1", "--mode", "replace", code=1)
    step("12-down", "local", "down")
    step("13-status-after-down", "local", "status", code=1)
