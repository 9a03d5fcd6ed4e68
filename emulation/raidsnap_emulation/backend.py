"""An emulated account for one command: what ``raidsnap ... --emulation`` runs against.

The command asks for an account and gets a ready boto3 session, the workflows' ARNs and the
clock snapshot ages are measured against. Everything the account changes in this process is
this module's business and is put back when the account closes: moto and the double (through
``Emulation``, which also keeps the process environment), and the logging of the functions,
which run in this process and would otherwise print between the command's own lines.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import boto3

from raidsnap_emulation.harness import Emulation, synthesize
from raidsnap_emulation.world import ArrayFixture, make_array

ARRAY = "db1"
MEMBERS = 3
SEED_SPACING_SECONDS = 3600

Prepare = Callable[[Emulation, ArrayFixture], None]
"""Shapes the account further (older sets, faults) after it is built, before the command."""


class EmulationSetupError(Exception):
    """The emulated account could not be built; the message says why and what to look at."""


@dataclass(frozen=True)
class Account:
    session: boto3.Session
    state_machines: dict[str, str]
    now: Callable[[], datetime]


@contextlib.contextmanager
def account(
    *, seed_backups: int = 0, template: Path | None = None, prepare: Prepare | None = None
) -> Iterator[Account]:
    """A fresh account in this process: the synthesized state machines on moto and one instance
    holding array db1 (RAID 0 of three volumes), after ``seed_backups`` backups of it one hour
    of emulated time apart. Nothing of it outlives the block."""
    with quiet_functions(), Emulation(_synthesized(template)) as emu:
        # Emulation keeps the process environment and puts it back on exit.
        os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"
        fixture = make_array(emu.hosts, ARRAY, MEMBERS)
        for seed in range(seed_backups):
            if seed:
                emu.clock.advance(SEED_SPACING_SECONDS)
            run = emu.run(
                "backup", {"array": ARRAY, "trigger": "manual"}, name=f"seed-backup-{seed + 1}"
            )
            if run.status != "SUCCEEDED":
                raise EmulationSetupError(f"seed backup {seed + 1} ended {run.status}: {run.cause}")
        if prepare is not None:
            prepare(emu, fixture)
        yield Account(
            session=boto3.Session(),
            state_machines=dict(emu.state_machines),
            now=emu.clock.now,
        )


def _synthesized(pinned: Path | None) -> Path:
    """The synthesized template the account runs; a failed synth is the app's problem, said as
    such rather than as a traceback."""
    if pinned is not None:
        return pinned
    try:
        return synthesize()
    except subprocess.CalledProcessError as err:
        raise EmulationSetupError(
            f"the CDK app does not synthesize (exit {err.returncode}); "
            "`node_modules/.bin/cdk synth` shows why"
        ) from None
    except RuntimeError as err:
        raise EmulationSetupError(f"cannot synthesize the CDK app: {err}") from None


@contextlib.contextmanager
def quiet_functions() -> Iterator[None]:
    """The functions log to this process's stdout. While the account lives: their warnings and
    errors go to stderr, with the command's progress; their info logs nowhere; the executor's
    evaluation chatter is dropped. Put back afterwards."""
    # The functions' one logger: imported now, so it exists before they run and can be tuned.
    from raidsnap.observability import logger as function_logger  # noqa: PLC0415

    handler = function_logger.registered_handler
    stream = handler.stream if isinstance(handler, logging.StreamHandler) else None
    level = function_logger.log_level
    moto_logger = logging.getLogger("moto")
    moto_level = moto_logger.level
    function_logger.setLevel(logging.WARNING)
    if isinstance(handler, logging.StreamHandler):
        handler.setStream(sys.stderr)
    moto_logger.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="No application metrics to publish")
            yield
    finally:
        moto_logger.setLevel(moto_level)
        function_logger.setLevel(level)
        if isinstance(handler, logging.StreamHandler) and stream is not None:
            handler.setStream(stream)
