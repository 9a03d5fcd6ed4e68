"""A local world that lives on between commands: ``raidsnap local up`` runs this module as a
background process, and every command given ``--local`` talks to it until ``raidsnap local
down`` ends it.

It is the emulation (harness.Emulation: the synthesized state machines on moto, the Lambda
handlers in this process, the double, the instances' md model), seeded with the demo's world
(array db1, RAID 0 of three gp3 volumes on one instance, backed up once; a drill instance;
recovery configured in place), served on a loopback port (endpoint.py) until SIGTERM or SIGINT.

Time: the world is built and seeded on the discrete-event clock, then paced (paced.py): emulated
time runs ``--speed`` times as fast as real time while nothing in the executions runs, and
stands still while something does. Snapshot times, FSR, volume states and command durations
are on it; so are the Date headers of every answer (the world's "now").

The state file (``world.json`` in ``--state-dir``, written once the world serves, removed when
it ends) says where: URL, PID, the token of the world's controls, the speed, and the start time
of this process (so that ``local down`` ends this process and no other that took its PID).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from raidsnap_emulation.backend import quiet_functions
from raidsnap_emulation.endpoint import serving
from raidsnap_emulation.harness import REGION, Emulation, synthesize
from raidsnap_emulation.local_faults import World
from raidsnap_emulation.paced import PacedClock

STATE_FILE = "world.json"
DEFAULT_SPEED = 60.0
# What the world's process must not inherit: it answers AWS calls itself, in process, and a
# client of its own must never be sent back to its own endpoint or to a real account.
_OUTSIDE = ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE")


def process_start(pid: int) -> str:
    """When the process started, in clock ticks since boot (/proc/<pid>/stat, field 22): with
    the PID, it names one process (a PID alone may be taken by another later)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[19]


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m raidsnap_emulation.local_world")
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--speed", type=float, default=DEFAULT_SPEED)
    parser.add_argument("--port", type=int, default=0)
    return parser.parse_args(argv)


def _clean_environment() -> None:
    for key in list(os.environ):
        if key.startswith(_OUTSIDE):
            del os.environ[key]


def _write_state(state_dir: Path, state: dict[str, Any]) -> Path:
    """Atomically, readable by this user only (it holds the controls' token)."""
    path = state_dir / STATE_FILE
    temporary = path.with_suffix(".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(state, out, indent=2)
    temporary.replace(path)
    return path


def serve(state_dir: Path, speed: float, port: int = 0) -> int:
    _clean_environment()
    state_dir.mkdir(parents=True, exist_ok=True)
    # Known from the start, so that whoever started it can end it while it is still building.
    me = {"pid": os.getpid(), "processStart": process_start(os.getpid())}
    path = _write_state(state_dir, {**me, "starting": True})
    try:
        _build_and_serve(state_dir, speed, port, me)
    finally:
        path.unlink(missing_ok=True)
    return 0


def _build_and_serve(state_dir: Path, speed: float, port: int, me: dict[str, Any]) -> None:
    """Until SIGTERM or SIGINT. While it builds, either ends the process at once (there is
    nothing to keep); once it serves, they end it in order: the endpoint, then the emulation."""
    clock = PacedClock()
    with quiet_functions(), Emulation(synthesize(), clock=clock) as emu:
        # Emulation keeps the process environment and puts it back on exit.
        os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"
        world = World.seed(emu)
        clock.pace(speed)
        token = secrets.token_hex(16)
        with serving(REGION, world.control, token, clock.now, port) as url:
            stop = threading.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda _signum, _frame: stop.set())
            _write_state(
                state_dir,
                {
                    **me,
                    "url": url,
                    "token": token,
                    "speed": speed,
                    "region": REGION,
                    "stateMachines": dict(emu.state_machines),
                },
            )
            print(f"serving at {url}", file=sys.stderr, flush=True)
            stop.wait()


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    return serve(args.state_dir, args.speed, args.port)


if __name__ == "__main__":
    code = main()
    # Everything the world holds is in this process's memory and ends with it: tearing the
    # interpreter down object by object (moto's backends, the service models) takes seconds,
    # which `raidsnap local down` would wait for.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
