"""What every command shares: the options that choose where it runs, the consoles, the backend,
exit codes, and starting and following a run.

Commands live in their own modules (app.py registers them); this module knows none of them."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, NoReturn

import typer
from botocore.exceptions import BotoCoreError, ClientError
from rich.console import Console
from rich.segment import Segment
from rich.text import Text

from raidsnap import clients
from raidsnap.text import printable

from . import backends, costs, inputs, local, queries
from .backends import AwsOptions, Backend, BackendError
from .follow import Followed, follow
from .progress import ec2_counter
from .views import (
    aws_message,
    cost_text,
    describe_input,
    error_view,
    human_duration,
    key_values,
    output_view,
    status_text,
)

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_TIMED_OUT = 3
EXIT_INTERRUPTED = 130

AWS = "AWS"
EMULATION = "Emulation"

EmulationFlag = Annotated[
    bool,
    typer.Option(
        "--emulation",
        help=(
            "Run against a local emulation instead of AWS: the synthesized state machines on "
            "moto, the Lambda code in this process, virtual time, and one demo instance "
            "holding array db1 (RAID 0 of 3 volumes). It is created for this command and gone "
            "when it ends: nothing carries over to the next command. Snapshot and run times "
            "are emulated time."
        ),
        rich_help_panel=EMULATION,
    ),
]
SeedBackups = Annotated[
    int,
    typer.Option(
        "--seed-backups",
        min=0,
        max=20,
        help=(
            "With --emulation: run this many backups of db1 first, one hour of emulated time "
            "apart, so sets, status and restore have something to work on."
        ),
        rich_help_panel=EMULATION,
    ),
]
Region = Annotated[str | None, typer.Option("--region", help="AWS region.", rich_help_panel=AWS)]
Profile = Annotated[
    str | None,
    typer.Option("--profile", help="Profile of the shared AWS config.", rich_help_panel=AWS),
]
Stack = Annotated[
    str,
    typer.Option(
        "--stack",
        help="The CloudFormation stack that holds the workflows.",
        rich_help_panel=AWS,
    ),
]
Wait = Annotated[
    bool,
    typer.Option(
        "--wait/--no-wait",
        help="Follow the run until it ends (default), or print its ARN and return.",
    ),
]
Yes = Annotated[
    bool,
    typer.Option("--yes", "-y", help="Do not ask for confirmation (for scripts)."),
]


@dataclass(frozen=True)
class Target:
    emulation: bool
    seed_backups: int
    region: str | None
    profile: str | None
    stack: str


def target_of(
    emulation: bool,
    seed_backups: int,
    region: str | None,
    profile: str | None,
    stack: str,
) -> Target:
    if emulation and (region or profile):
        raise typer.BadParameter(
            "--region and --profile choose an AWS account; the emulation has none",
            param_hint="'--emulation'",
        )
    if seed_backups and not emulation:
        raise typer.BadParameter(
            "only seeds the local emulation; add --emulation",
            param_hint="'--seed-backups'",
        )
    return Target(emulation, seed_backups, region, profile, stack)


def no_wait_on_emulation(target: Target, wait: bool) -> None:
    if target.emulation and not wait:
        raise typer.BadParameter(
            "the emulation ends with this command, so the run would end with it; "
            "leave --no-wait out",
            param_hint="'--no-wait'",
        )


class SafeConsole(Console):
    """A console that never hands the terminal a control character that came with the data
    shown (a tag value, a cause, an execution name may hold any character, escape sequences
    included, and rich prints them as text): each becomes a space. Line breaks and tabs stay;
    rich's own styling is not text and is untouched."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            seg if seg.control else Segment(printable(seg.text), seg.style, seg.control)
            for seg in buffer
        )


def consoles() -> tuple[Console, Console]:
    """Results on stdout, progress and errors on stderr. Not on a terminal, lines are long
    enough that set ids and causes are never cut."""
    out = SafeConsole(highlight=False, width=None if sys.stdout.isatty() else 160)
    err = SafeConsole(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)
    return out, err


@contextlib.contextmanager
def opened(target: Target, err: Console) -> Iterator[Backend]:
    """Open the backend; AWS and setup problems become one line and exit code 1."""
    try:
        with contextlib.ExitStack() as stack:
            if local.chosen():
                backend = stack.enter_context(local.backend(target))
            elif target.emulation:
                status = err.status("starting the local emulation…")
                status.start()
                try:
                    backend = stack.enter_context(backends.emulation(target.seed_backups))
                finally:
                    status.stop()
            else:
                options_aws = AwsOptions(target.stack, target.region, target.profile)
                backend = stack.enter_context(backends.aws(options_aws))
            yield backend
    except (BackendError, queries.ExecutionNotFoundError) as error:
        err.print(Text(f"error: {error}", style="red"))
        raise typer.Exit(EXIT_FAILED) from None
    except (ClientError, BotoCoreError) as error:
        aws_failed(error, err)


def aws_failed(error: ClientError | BotoCoreError, err: Console) -> NoReturn:
    """An AWS error as one red line, and exit code 1."""
    err.print(Text(aws_message(error), style="red"))
    raise typer.Exit(EXIT_FAILED) from None


def bad(error: inputs.InputError) -> typer.BadParameter:
    return typer.BadParameter(error.problem, param_hint=f"'{error.option}'")


def exit_code(status: str) -> int:
    if status == "SUCCEEDED":
        return 0
    if status in ("TIMED_OUT", "ABORTED"):
        return EXIT_TIMED_OUT
    return EXIT_FAILED


def start_and_follow(
    *,
    backend: Backend,
    workflow: str,
    payload: dict[str, Any],
    wait: bool,
    out: Console,
    err: Console,
) -> int:
    name = queries.execution_name(workflow, str(payload["array"]))
    started = backend.sfn.start_execution(
        stateMachineArn=backend.arn(workflow), name=name, input=json_line(payload)
    )
    arn = started["executionArn"]
    err.print(
        Text.assemble(
            ("started ", "dim"),
            (f"{workflow} ", "bold"),
            describe_input(payload),
            (f" on {backend.description}", "dim"),
        )
    )
    err.print(Text.assemble(("execution ", "dim"), arn))
    if not wait:
        out.print(arn)
        return 0
    return follow_to_end(backend, workflow, arn, out, err)


def follow_to_end(
    backend: Backend,
    workflow: str,
    arn: str,
    out: Console,
    err: Console,
    *,
    prices: Mapping[str, Any] | None = None,
) -> int:
    """Follow the run, then show how it ended: its outcome and what it cost."""
    followed = follow_progress(backend, workflow, arn, err)
    info = queries.describe(backend.sfn, arn, workflow, timed=True)
    cost = costs.cost_lines(backend.sfn, info, prices or {}, backend.snapshot_now())
    print_outcome(info, out, err, cost)
    return exit_code(followed.status)


def follow_progress(backend: Backend, workflow: str, arn: str, err: Console) -> Followed:
    """The run's progress on ``err`` until it ends; interrupted, what goes on and exit 130."""
    try:
        # Counts EC2 gives while a step waits. Not on the emulation: its runs go on in emulated
        # time while this command looks, so EC2 there is ahead of the history read.
        live = workflow == "restore" and not backend.history_times
        counter = ec2_counter(clients.ec2()) if live else None
        return follow(
            backend.sfn,
            arn,
            err,
            backend.poll_seconds,
            now=backend.snapshot_now,
            workflow=workflow,
            counter=counter,
        )
    except KeyboardInterrupt:
        if backend.outlives_command:
            err.print(Text(f"stopped following; the run goes on: raidsnap status {arn} --follow"))
        else:
            err.print(Text("stopped; the emulation, and the run in it, end with this command"))
        raise typer.Exit(EXIT_INTERRUPTED) from None


def print_outcome(
    info: queries.ExecutionInfo,
    out: Console,
    err: Console,
    cost: Mapping[str, Any] | None = None,
) -> None:
    """The headline, then what the run made (or its error), then ``cost`` when given (a view
    that shows the cost elsewhere gives none): on stdout for a success, else on stderr."""
    took = human_duration(info.took)
    headline = Text.assemble(status_text(info.status), f" {info.workflow} {info.name} in {took}")
    if info.status == "SUCCEEDED":
        out.print(headline)
        out.print(output_view(info.workflow, info.output, cost))
    elif info.status == "RUNNING":
        out.print(headline)
    else:
        err.print(headline)
        err.print(error_view(info.error or info.status, info.cause))
        if cost is not None:
            err.print(key_values([("cost", cost_text(cost))]))


def json_line(payload: Any) -> str:
    return json.dumps(payload, separators=(",", ":"))
