"""Where the local world runs, and its process: the state file it writes once it serves, the
check that a recorded PID is still that world's process, starting it, ending it, and its
controls.

The state file (world.json) lives in $RAIDSNAP_LOCAL_DIR, else $XDG_RUNTIME_DIR/raidsnap-local,
else ~/.cache/raidsnap/local (XDG_CACHE_HOME respected), next to the world's log."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

STATE_FILE = "world.json"
LOG_FILE = "world.log"
WORLD_MODULE = "raidsnap_emulation.local_world"
# The packages the world runs: it runs them from where this command found them.
_PACKAGES = ("raidsnap", "raidsnap_cli", "raidsnap_emulation")


class WorldError(Exception):
    """The local world cannot do what was asked; the message says why."""


@dataclass(frozen=True)
class World:
    """A world as its state file records it: its process from the start, the rest once it
    serves."""

    pid: int
    process_start: str
    starting: bool
    url: str = ""
    token: str = ""
    speed: float = 0.0
    region: str = ""
    state_machines: dict[str, str] = field(default_factory=dict)


def state_dir() -> Path:
    chosen = os.environ.get("RAIDSNAP_LOCAL_DIR")
    if chosen:
        return Path(chosen)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "raidsnap-local"
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "raidsnap" / "local"


def process_start(pid: int) -> str | None:
    """The start time of a live process (/proc/<pid>/stat, field 22, clock ticks since boot),
    or None when no process has that PID (or only its zombie: it has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else fields[19]


def ours(world: World) -> bool:
    """Whether the recorded process still runs and is the one the world started as: the same
    PID with the same start time (a PID alone may since belong to another process)."""
    return world.pid > 0 and process_start(world.pid) == world.process_start


def recorded() -> World | None:
    """The world the state file records (running or not), or None."""
    try:
        raw = json.loads((state_dir() / STATE_FILE).read_text())
        pid, started = int(raw["pid"]), str(raw["processStart"])
        if raw.get("starting"):
            return World(pid, started, starting=True)
        return World(
            pid,
            started,
            starting=False,
            url=str(raw["url"]),
            token=str(raw["token"]),
            speed=float(raw["speed"]),
            region=str(raw["region"]),
            state_machines={str(k): str(v) for k, v in raw["stateMachines"].items()},
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def alive() -> World | None:
    """The recorded world while its process runs, serving or still building."""
    world = recorded()
    return world if world is not None and ours(world) else None


def running() -> World | None:
    """The recorded world while it serves."""
    world = alive()
    return world if world is not None and not world.starting else None


def control(world: World, name: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """One of the world's own controls (raidsnap_emulation.endpoint), with its token."""
    request = urllib.request.Request(  # noqa: S310 - the world's URL, on 127.0.0.1
        f"{world.url}/_raidsnap/{name}",
        data=json.dumps(body or {}).encode(),
        headers={"X-Raidsnap-Token": world.token, "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
            return dict(json.loads(answer.read()))
    except urllib.error.HTTPError as err:
        try:
            said = json.loads(err.read()).get("error")
        except ValueError:
            said = None
        raise WorldError(said or f"the local world answered {err.code}") from None
    except (urllib.error.URLError, OSError) as err:
        raise WorldError(f"the local world at {world.url} does not answer: {err}") from None


def world_now(world: World) -> datetime:
    return datetime.fromisoformat(str(control(world, "now")["now"]))


def start(speed: float, timeout: float) -> World:
    """Start the world's process in the background (a session of its own, so that it outlives
    this command and the terminal's signals), and wait until it serves."""
    missing = [m for m in (WORLD_MODULE, "moto") if importlib.util.find_spec(m) is None]
    if missing:
        raise WorldError(
            f"the local world needs the emulation, and {missing[0]} is not installed: "
            "install raidsnap-cli[emulation] (`make setup` does, into .venv)"
        )
    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    building = alive()
    if building is not None:  # another command started it: wait for that one
        return _serving(building.pid, None, timeout)
    (folder / STATE_FILE).unlink(missing_ok=True)
    with (folder / LOG_FILE).open("wb") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", WORLD_MODULE, "--state-dir", str(folder), "--speed", f"{speed}"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=_world_environment(),
        )
    return _serving(child.pid, child, timeout)


def _serving(pid: int, child: subprocess.Popen[bytes] | None, timeout: float) -> World:
    """Wait until the world of process ``pid`` serves; ``child``: this command started it."""
    deadline = time.monotonic() + timeout
    while True:
        world = recorded()
        if world is not None and world.pid == pid and not world.starting:
            return world
        gone = child.poll() is not None if child else process_start(pid) is None
        if gone:
            code = f" (exit {child.returncode})" if child else ""
            raise WorldError(f"the local world ended at its start{code}:\n{_tail()}")
        if time.monotonic() > deadline:
            if child is not None:
                child.terminate()  # the process this command started, by its PID
            raise WorldError(f"the local world was not serving after {timeout:g} s:\n{_tail()}")
        time.sleep(0.1)


def _world_environment() -> dict[str, str]:
    """This command's environment, with the packages found where this command found them."""
    env = dict(os.environ)
    paths = []
    for package in _PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            paths.append(str(Path(next(iter(spec.submodule_search_locations))).parent))
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def _tail(lines: int = 20) -> str:
    try:
        text = (state_dir() / LOG_FILE).read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def stop(world: World, timeout: float) -> bool:
    """End the world's process (SIGTERM, then SIGKILL if it has not ended in ``timeout``), only
    while the recorded PID is still that process. True when it ended."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not ours(world):
            break
        os.kill(world.pid, sig)
        deadline = time.monotonic() + timeout
        while ours(world) and time.monotonic() < deadline:
            time.sleep(0.05)
    ended = not ours(world)
    if ended:
        (state_dir() / STATE_FILE).unlink(missing_ok=True)
    return ended
