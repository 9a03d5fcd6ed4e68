"""``raidsnap drill`` (a restore drill now, as its schedule runs it) and ``raidsnap cancel`` (stop
a running restore, recovery or drill, after saying what its clean-up will and will not do)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from botocore.exceptions import BotoCoreError, ClientError
from rich.console import Console
from rich.text import Text

from raidsnap import models
from raidsnap.errors import InvalidInputError

from . import inputs, queries, schedules
from .backends import Backend
from .common import (
    EXIT_FAILED,
    EmulationFlag,
    Profile,
    Region,
    SeedBackups,
    Stack,
    Wait,
    Yes,
    consoles,
    no_wait_on_emulation,
    opened,
    start_and_follow,
    target_of,
)
from .follow import narrate
from .progress import Narrator
from .restoring import refuse_unattended
from .stopping import consequences, to_stop
from .views import aws_message

# ---------------------------------------------------------------------- drill


class DrillError(Exception):
    """The drill cannot be started as asked; the message says what to give."""


def drill_input(
    backend: Backend,
    array: str,
    target: str | None,
    set_id: str | None,
    initialization: str | None,
) -> dict[str, Any]:
    """The drill's input: the schedule's (trigger manual), or one for --target."""
    if target is None:
        try:
            scheduled = [
                schedules.input_of(s) for s in schedules.of_array(backend.arn("drill"), array)
            ]
        except (ClientError, BotoCoreError) as error:
            raise DrillError(
                f"the drill schedules could not be read ({aws_message(error)}); give the drill "
                "instance with --target"
            ) from None
        if not scheduled:
            raise DrillError(
                f"{array} has no drill schedule (arrays.{array}.drill in the configuration); "
                f"give the drill instance with --target (an instance tagged raidsnap:array="
                f"{array}-drill, never {array}'s own)"
            )
        payload = dict(scheduled[0])
    else:
        payload = {"array": array, "targetInstanceId": target}
    payload["trigger"] = "manual"
    if set_id is not None:
        payload["setId"] = set_id
    if initialization is not None:
        payload["initialization"] = initialization
    try:
        models.parse_drill_input(payload)
    except InvalidInputError as error:
        option, problem = inputs.option_and_problem(error.field, str(error))
        raise typer.BadParameter(problem, param_hint=f"'{option}'") from None
    return payload


def drill(
    *,
    array: Annotated[str, typer.Argument(help="The array, as its raidsnap:array tag names it.")],
    target_instance: Annotated[
        str | None,
        typer.Option(
            "--target",
            help="The drill instance (default: the one the array's drill schedule names).",
        ),
    ] = None,
    set_id: Annotated[
        str | None, typer.Option("--set", help='"latest" (default) or a set id.')
    ] = None,
    initialization: Annotated[
        str | None,
        typer.Option("--initialization", help="fsr, prewarm or none (default: the schedule's)."),
    ] = None,
    wait: Wait = True,
    emulation: EmulationFlag = False,
    seed_backups: SeedBackups = 0,
    region: Region = None,
    profile: Profile = None,
    stack: Stack = "raidsnap",
) -> None:
    """Run a restore drill of ARRAY now, as its schedule does.

    Its newest complete set (or --set) is restored read-only onto the drill instance, checked,
    and removed again. Nothing of the array itself changes."""
    target = target_of(emulation, seed_backups, region, profile, stack)
    no_wait_on_emulation(target, wait)
    out, err = consoles()
    with opened(target, err) as backend:
        try:
            payload = drill_input(backend, array, target_instance, set_id, initialization)
        except DrillError as error:
            err.print(Text(f"error: {error}", style="red"))
            raise typer.Exit(EXIT_FAILED) from None
        code = start_and_follow(
            backend=backend, workflow="drill", payload=payload, wait=wait, out=out, err=err
        )
    raise typer.Exit(code)


# ---------------------------------------------------------------------- cancel

# The selection and the consequences live in raidsnap_cli.stopping.
_to_stop = to_stop
__all__ = ["cancel", "consequences", "drill"]


def cancel(
    *,
    what: Annotated[
        str,
        typer.Argument(
            metavar="EXECUTION|ARRAY",
            help="A running execution (ARN or name), or an array: its running restore.",
        ),
    ],
    yes: Yes = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="With --yes: stop even where the command warns (see what it says first).",
        ),
    ] = False,
    emulation: EmulationFlag = False,
    seed_backups: SeedBackups = 0,
    region: Region = None,
    profile: Profile = None,
    stack: Stack = "raidsnap",
) -> None:
    """Stop a running restore, recovery or drill, after saying what that leaves.

    For a recovery or a drill, the restore it runs is stopped: the parent then ends through its
    own failure path. --yes stops without asking unless the command warns about what the stop
    leaves; then it stops only with --force as well."""
    target = target_of(emulation, seed_backups, region, profile, stack)
    refuse_unattended(yes, False)
    out, err = consoles()
    with opened(target, err) as backend:
        run, why = to_stop(backend, what)
        told = narrate(backend.sfn, run.arn, run.workflow)
        warned = _say_what_stops(run, told, why, err)
        if yes and warned and not force:
            err.print(
                Text(
                    "nothing stopped: --yes does not agree to a warning. Read it; to stop "
                    "anyway, run again with --yes --force",
                    style="red",
                )
            )
            raise typer.Exit(EXIT_FAILED)
        if not yes and not typer.confirm(
            f"Stop {run.workflow} {run.name}?", default=False, err=True
        ):
            err.print("nothing stopped")
            raise typer.Exit(EXIT_FAILED)
        backend.sfn.stop_execution(
            executionArn=run.arn, error="Cancelled", cause="stopped with raidsnap cancel"
        )
        out.print(Text(f"stopped {run.workflow} {run.name}", style="bold"))
        out.print(Text(f"follow its clean-up: raidsnap status {run.name}", style="dim"))


def _say_what_stops(run: queries.ExecutionInfo, told: Narrator, why: str, err: Console) -> bool:
    """Say what stops and what that leaves; whether any of it is a warning."""
    err.print(
        Text.assemble(
            ("stop ", "bold"),
            f"{run.workflow} {run.name}",
            (f" (array {run.array}, now: {told.now_words})", "dim"),
        )
    )
    if why:
        err.print(Text(f"  ({why})", style="dim"))
    warned = False
    for line in consequences(run, told):
        warning = line.startswith("WARNING")
        warned = warned or warning
        err.print(Text(f"  {line}", style="yellow" if warning else ""))
    return warned
