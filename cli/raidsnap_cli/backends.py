"""Where the commands run: AWS through the standard credential chain, or the local emulation.

Both give the commands the same things: a Step Functions client, the workflows' ARNs, the
clock that snapshot ages are measured against, and how often to poll a running execution.

raidsnap's domain modules, which the commands reuse to read snapshot sets, make their boto3
clients from boto3's default session and find the manifest table in the environment, as the
functions do. The command is the process: it configures both once, for itself, and the
emulation (an optional package, imported only for --emulation) sets up and puts back whatever
it changes in the process."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any

import boto3

from raidsnap import clients

from .resolve import ResolveError, lock_table, manifest_table, resolve

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

# What --emulation needs beyond the command: the emulation package and what it imports.
EMULATION_EXTRA = "raidsnap-cli[emulation]"
_EMULATION_MODULES = ("raidsnap_emulation", "moto", "policy_sentry", "yaml")
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
    _resolve_lock: Callable[[], str]
    # Whether run times are read from each run's history (the emulation's are emulated time
    # there, while DescribeExecution's dates are this machine's).
    history_times: bool = False
    _machines: dict[str, str] | None = field(default=None, init=False)
    _found_by: str = field(default="", init=False)

    def read_sets(self) -> None:
        """The domain modules read set manifests from the table named in SNAPSHOT_SETS_TABLE,
        as the functions do: name it before reading sets."""
        try:
            os.environ["SNAPSHOT_SETS_TABLE"] = self._resolve_sets()
        except ResolveError as err:
            raise BackendError(str(err)) from None

    def lock_table(self) -> str:
        """The restore lock table, where each array's recorded instance is kept."""
        try:
            return self._resolve_lock()
        except ResolveError as err:
            raise BackendError(str(err)) from None

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


@contextlib.contextmanager
def aws(options: AwsOptions) -> Iterator[Backend]:
    session = boto3.Session(profile_name=options.profile, region_name=options.region)
    if session.region_name is None:
        raise BackendError(
            "no AWS region: pass --region, set AWS_REGION, or give the profile a region"
        )
    # The domain modules' clients come from the default session: this command's account.
    boto3.setup_default_session(profile_name=options.profile, region_name=options.region)
    clients.reset()
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
        _resolve_lock=lambda: lock_table(cloudformation, session.client("dynamodb"), options.stack),
    )


def _emulation_backend() -> ModuleType:
    """The emulation, imported on request only: moto and the emulation are paid for, and need
    to be installed, only with --emulation."""
    try:
        from raidsnap_emulation import backend  # noqa: PLC0415
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] not in _EMULATION_MODULES:
            raise
        raise BackendError(
            f"--emulation needs the local emulation, and {err.name} is not installed: "
            f"install {EMULATION_EXTRA} (`make setup` does, into .venv)"
        ) from None
    return backend


@contextlib.contextmanager
def emulation(seed_backups: int) -> Iterator[Backend]:
    """A fresh emulated account in this process (see raidsnap_emulation.backend); nothing
    outlives the command."""
    emulated = _emulation_backend()
    try:
        with emulated.account(seed_backups=seed_backups) as account:
            session = account.session
            yield Backend(
                sfn=session.client("stepfunctions"),
                snapshot_now=account.now,
                poll_seconds=EMULATION_POLL_SECONDS,
                description="local emulation (this process only)",
                outlives_command=False,
                _resolve=lambda: (dict(account.state_machines), "the emulation"),
                _resolve_sets=lambda: manifest_table(
                    session.client("cloudformation"), session.client("dynamodb"), "raidsnap"
                ),
                _resolve_lock=lambda: lock_table(
                    session.client("cloudformation"), session.client("dynamodb"), "raidsnap"
                ),
                history_times=True,
            )
    except emulated.EmulationSetupError as err:
        raise BackendError(str(err)) from None
