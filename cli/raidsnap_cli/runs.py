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
    aws_message,
    consoles,
    no_wait_on_emulation,
    opened,
    start_and_follow,
    target_of,
)
from .follow import narrate
from .progress import Narrator
from .restoring import refuse_unattended
from .status import NESTED_SUFFIX

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


def _to_stop(backend: Backend, what: str) -> tuple[queries.ExecutionInfo, str]:
    """The run to stop, and why that one: the one named, or the array's running restore (else
    its recovery or drill); for a recovery or a drill, the restore it runs, while it runs (the
    parent then ends through its own failure path, which a stop of the parent itself skips)."""
    machines = backend.state_machines
    why = ""
    try:
        run = queries.find(backend.sfn, machines, what)
    except queries.ExecutionNotFoundError:
        if what.startswith("arn:"):
            raise
        running = _running(backend, what)
        if not running:
            raise queries.ExecutionNotFoundError(
                f"no execution named {what!r}, and no restore, recovery or drill of an array "
                f"{what!r} runs now (raidsnap status shows what does)"
            ) from None
        # A recovery or drill first: stopping it stops the restore it runs, as it should.
        run = next((r for r in running if r.workflow != "restore"), running[0])
        why = f"the {run.workflow} of {what} that runs now"
    if run.status != "RUNNING":
        raise queries.ExecutionNotFoundError(f"{run.workflow} {run.name} has ended: {run.status}")
    if run.workflow in ("recovery", "drill"):
        child = _child(backend, run)
        if child is not None and child.status == "RUNNING":
            return child, (
                f"the restore {run.workflow} {run.name} runs: stopping it ends the "
                f"{run.workflow} through its own failure path"
            )
    return run, why


def _running(backend: Backend, array: str) -> list[queries.ExecutionInfo]:
    found = []
    for workflow in ("restore", "recovery", "drill"):
        machine = backend.state_machines.get(workflow)
        if machine is None:
            continue
        page = backend.sfn.list_executions(stateMachineArn=machine, statusFilter="RUNNING")
        for e in page["executions"]:
            info = queries.describe(backend.sfn, e["executionArn"], workflow)
            if info.array == array:
                found.append(info)
    return found


def _child(backend: Backend, run: queries.ExecutionInfo) -> queries.ExecutionInfo | None:
    if run.workflow == "recovery":
        name = run.name + NESTED_SUFFIX
    else:
        name = narrate(backend.sfn, run.arn, run.workflow).facts.restore
    machine = backend.state_machines.get("restore")
    if not name or machine is None:
        return None
    arn = machine.replace(":stateMachine:", ":execution:", 1) + ":" + name
    try:
        return queries.describe(backend.sfn, arn, "restore")
    except ClientError:
        return None


def consequences(run: queries.ExecutionInfo, told: Narrator) -> list[str]:
    """What stopping ``run`` now leaves, from the steps it has entered."""
    entered = {name for _, name in told.states}
    if run.workflow != "restore":
        return [
            f"the {run.workflow} stops where it is; a {run.workflow} stopped by hand runs no "
            "failure path of its own"
        ]
    lines = []
    if told.mounted:
        lines.append(
            f"the array is assembled and mounted at {told.facts.mount_point or 'its mount point'}"
            " and stays so: it is the user's now; a prewarm command still reading on the "
            "instance goes on (aws ssm cancel-command stops it)"
        )
    elif "CreateVolumes" not in entered:
        lines.append("nothing was created yet: the run ends and its lock is given back")
    else:
        lines.append(
            "the clean-up after a stopped run deletes the volumes this run created that are not "
            "attached, turns off the FSR it enabled and gives the lock back; a volume already "
            "attached is left alone and reported"
        )
    if "ReleaseOldArray" in entered and not told.mounted:
        old = ", ".join(told.facts.old_volumes) or "its old members"
        lines.append(
            "WARNING: this replace has released the old array on "
            f"{told.facts.target or 'the instance'}: a stopped run does NOT put it back (only a "
            f"failed run does). {old} stay detached, kept and tagged raidsnap:replaced-by; "
            "bring the array back by hand (attach them, mdadm --assemble, mount) or restore again"
        )
    return lines


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
    emulation: EmulationFlag = False,
    seed_backups: SeedBackups = 0,
    region: Region = None,
    profile: Profile = None,
    stack: Stack = "raidsnap",
) -> None:
    """Stop a running restore, recovery or drill, after saying what that leaves.

    For a recovery or a drill, the restore it runs is stopped: the parent then ends through its
    own failure path."""
    target = target_of(emulation, seed_backups, region, profile, stack)
    refuse_unattended(yes, False)
    out, err = consoles()
    with opened(target, err) as backend:
        run, why = _to_stop(backend, what)
        told = narrate(backend.sfn, run.arn, run.workflow)
        _say_what_stops(run, told, why, err)
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


def _say_what_stops(run: queries.ExecutionInfo, told: Narrator, why: str, err: Console) -> None:
    err.print(
        Text.assemble(
            ("stop ", "bold"),
            f"{run.workflow} {run.name}",
            (f" (array {run.array}, now: {told.now_words})", "dim"),
        )
    )
    if why:
        err.print(Text(f"  ({why})", style="dim"))
    for line in consequences(run, told):
        err.print(Text(f"  {line}", style="yellow" if line.startswith("WARNING") else ""))
