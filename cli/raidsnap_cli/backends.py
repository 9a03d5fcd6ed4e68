"""Where the commands run: AWS through the standard credential chain, or the local emulation.

Both give the commands the same things: a Step Functions client, the workflows' ARNs, the
clock that snapshot ages are measured against, and how often to poll a running execution.
raidsnap's domain modules make their own boto3 clients from boto3's default session, so a
``--profile`` or ``--region`` is installed there for the length of one command."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3

from raidsnap import clients

from .resolve import ResolveError, manifest_table, resolve

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

    from raidsnap_emulation.harness import Emulation
    from raidsnap_emulation.world import ArrayFixture

EMULATION_ARRAY = "db1"
EMULATION_MEMBERS = 3
SEED_SPACING_SECONDS = 3600
AWS_POLL_SECONDS = 2.0
EMULATION_POLL_SECONDS = 0.02


class BackendError(Exception):
    """The backend cannot do what was asked; the message says why."""


@dataclass
class Backend:
    sfn: SFNClient
    snapshot_now: Callable[[], datetime]
    poll_seconds: float
    description: str
    # False for the emulation: what runs in it ends when the command does.
    outlives_command: bool
    _resolve: Callable[[], tuple[dict[str, str], str]]
    _resolve_sets: Callable[[], str]
    _machines: dict[str, str] | None = field(default=None, init=False)
    _found_by: str = field(default="", init=False)

    @contextlib.contextmanager
    def reading_sets(self) -> Iterator[None]:
        """The domain modules read set manifests from the table named in SNAPSHOT_SETS_TABLE,
        as the functions do: name it for the length of the block."""
        try:
            table = self._resolve_sets()
        except ResolveError as err:
            raise BackendError(str(err)) from None
        saved = os.environ.get("SNAPSHOT_SETS_TABLE")
        os.environ["SNAPSHOT_SETS_TABLE"] = table
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop("SNAPSHOT_SETS_TABLE", None)
            else:
                os.environ["SNAPSHOT_SETS_TABLE"] = saved

    @property
    def state_machines(self) -> dict[str, str]:
        """Resolved on first use, so ``sets`` needs no Step Functions or CloudFormation access."""
        if self._machines is None:
            try:
                self._machines, self._found_by = self._resolve()
            except ResolveError as err:
                raise BackendError(str(err)) from None
        return self._machines

    def arn(self, workflow: str) -> str:
        machines = self.state_machines
        if workflow not in machines:
            have = ", ".join(sorted(machines)) or "none"
            raise BackendError(
                f"no {workflow} workflow found ({self._found_by}; workflows found: {have}); "
                f"is the {workflow} workflow deployed?"
            )
        return machines[workflow]


@dataclass(frozen=True)
class AwsOptions:
    stack: str
    region: str | None
    profile: str | None


@dataclass(frozen=True)
class EmulationOptions:
    seed_backups: int = 0
    # Tests shape the emulated world further (old sets, faults) before the command runs.
    prepare: Callable[[Emulation, ArrayFixture], None] | None = None
    template: Path | None = None


@contextlib.contextmanager
def aws(options: AwsOptions) -> Iterator[Backend]:
    saved = boto3.DEFAULT_SESSION
    session = boto3.Session(profile_name=options.profile, region_name=options.region)
    if session.region_name is None:
        raise BackendError(
            "no AWS region: pass --region, set AWS_REGION, or give the profile a region"
        )
    boto3.DEFAULT_SESSION = session
    clients.reset()
    try:
        sfn = session.client("stepfunctions")
        cloudformation: Any = session.client("cloudformation")
        yield Backend(
            sfn=sfn,
            snapshot_now=lambda: datetime.now(UTC),
            poll_seconds=AWS_POLL_SECONDS,
            description=f"AWS {session.region_name}, stack {options.stack}",
            outlives_command=True,
            _resolve=lambda: resolve(cloudformation, sfn, options.stack),
            _resolve_sets=lambda: manifest_table(
                cloudformation, session.client("dynamodb"), options.stack
            ),
        )
    finally:
        boto3.DEFAULT_SESSION = saved
        clients.reset()


@contextlib.contextmanager
def _quiet_functions() -> Iterator[None]:
    """The functions run in this process and log to its stdout. For one command: their
    warnings and errors go to stderr with the progress, their info logs and metrics nowhere,
    and the executor's evaluation chatter is dropped. Everything is put back afterwards."""
    # The functions' one logger: imported now, so it exists before they run and can be tuned.
    from raidsnap.observability import logger as function_logger  # noqa: PLC0415

    saved_env = dict(os.environ)
    os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"
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
        os.environ.clear()
        os.environ.update(saved_env)


@contextlib.contextmanager
def _synthesized(pinned: Path | None) -> Iterator[Path]:
    """The synthesized template the emulation runs; a failed synth is the app's problem, said
    as such rather than as a traceback."""
    from raidsnap_emulation.harness import synthesize  # noqa: PLC0415

    if pinned is not None:
        yield pinned
        return
    try:
        template = synthesize()
    except subprocess.CalledProcessError as err:
        raise BackendError(
            f"the CDK app does not synthesize (exit {err.returncode}); "
            "`node_modules/.bin/cdk synth` shows why"
        ) from None
    except RuntimeError as err:
        raise BackendError(f"cannot synthesize the CDK app: {err}") from None
    yield template


@contextlib.contextmanager
def emulation(options: EmulationOptions) -> Iterator[Backend]:
    """A fresh emulated account in this process: the synthesized state machines on moto, and
    one instance holding array db1 (RAID 0 of three volumes). Nothing outlives the command."""
    # Imported here: moto and the emulation are only needed, and only paid for, on request.
    from raidsnap_emulation.harness import Emulation  # noqa: PLC0415
    from raidsnap_emulation.world import make_array  # noqa: PLC0415

    with (
        _quiet_functions(),
        _synthesized(options.template) as template,
        Emulation(template) as emu,
    ):
        fixture = make_array(emu.hosts, EMULATION_ARRAY, EMULATION_MEMBERS)
        for seed in range(options.seed_backups):
            if seed:
                emu.clock.advance(SEED_SPACING_SECONDS)
            run = emu.run(
                "backup",
                {"array": EMULATION_ARRAY, "trigger": "manual"},
                name=f"seed-backup-{seed + 1}",
            )
            if run.status != "SUCCEEDED":
                raise BackendError(f"seed backup {seed + 1} ended {run.status}: {run.cause}")
        if options.prepare is not None:
            options.prepare(emu, fixture)
        yield Backend(
            sfn=boto3.client("stepfunctions"),
            snapshot_now=emu.clock.now,
            poll_seconds=EMULATION_POLL_SECONDS,
            description="local emulation (this process only)",
            outlives_command=False,
            _resolve=lambda: (dict(emu.state_machines), "the emulation"),
            _resolve_sets=lambda: manifest_table(
                boto3.client("cloudformation"), boto3.client("dynamodb"), "raidsnap"
            ),
        )


@dataclass(frozen=True)
class Hooks:
    """Passed in as typer's context object by tests, never by a user: shape the emulated world
    (older sets, faults) after it is built and before the command runs."""

    prepare_emulation: Callable[[Emulation, ArrayFixture], None] | None = None
    # A template synthesized once, instead of a synth check at every command.
    template: Path | None = None
