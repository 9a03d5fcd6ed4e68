"""``raidsnap restore`` and ``raidsnap recover``: the plan first, then the run.

Before anything starts, the command shows what the run would do (raidsnap_cli.plan: the same
code as the run's first step, changing nothing) and asks. ``--yes`` starts without asking (for
scripts, which cannot answer); ``--dry-run`` shows the plan and starts nothing. Where no one can
answer (stdin is not a terminal) and ``--yes`` was not given, the command refuses and starts
nothing. An input the run would refuse is refused here, with the run's error name and cause,
and an unknown array or set is answered with what exists."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from botocore.exceptions import BotoCoreError, ClientError
from rich.console import Console
from rich.text import Text

from raidsnap.models import Initialization, VolumeType

from . import inputs, known
from .backends import Backend, BackendError
from .common import (
    EXIT_FAILED,
    EmulationFlag,
    Profile,
    Region,
    SeedBackups,
    Stack,
    Wait,
    Yes,
    bad,
    consoles,
    no_wait_on_emulation,
    opened,
    start_and_follow,
    target_of,
)
from .plan import PlanRefusedError, PlanUnavailableError, RestorePlan, restore_plan
from .plan_view import plan_view
from .views import aws_message

# Refusals that come from a name that matched nothing: answered with what exists.
NOT_FOUND = ("ArrayNotFound", "SnapshotSetNotFound", "IncompleteSnapshotSet")

DryRun = Annotated[
    bool,
    typer.Option("--dry-run", help="Show the plan and start nothing."),
]
Array = Annotated[str, typer.Argument(help="The array, as its raidsnap:array tag names it.")]
SetOption = Annotated[
    str | None,
    typer.Option("--set", help='"latest" (the newest complete set) or a set id.'),
]
InitializationOption = Annotated[
    Initialization | None,
    typer.Option(
        "--initialization",
        help="auto (the quickest to full performance), fsr, rate, prewarm or none "
        "(default: config, else auto).",
    ),
]
Rate = Annotated[
    int | None,
    typer.Option("--rate", help="Volume initialization rate, MiB/s (100..300)."),
]


def stdin_is_terminal() -> bool:
    """Whether someone can answer a question (tests stand in for a terminal here)."""
    return sys.stdin.isatty()


def refuse_unattended(yes: bool, dry_run: bool) -> None:
    if yes or dry_run or stdin_is_terminal():
        return
    raise typer.BadParameter(
        "is needed when stdin is not a terminal: a restore shows its plan and asks before it "
        "starts, and no one can answer here. Read the plan with --dry-run, then start it with "
        "--yes",
        param_hint="'--yes'",
    )


def plan_then_start(
    backend: Backend,
    payload: dict[str, Any],
    *,
    yes: bool,
    dry_run: bool,
    wait: bool,
    out: Console,
    err: Console,
) -> int:
    """Show the plan (on stdout for --dry-run, else with the progress on stderr), ask, start."""
    shown = out if dry_run else err
    try:
        planned = restore_plan(backend, payload)
    except PlanRefusedError as refused:
        return _refused(refused, payload, backend, err)
    except (PlanUnavailableError, BackendError, ClientError, BotoCoreError) as error:
        why = aws_message(error) if isinstance(error, ClientError | BotoCoreError) else str(error)
        err.print(Text(f"the plan could not be computed: {why}", style="yellow"))
        if dry_run:
            return EXIT_FAILED
        if not yes and not typer.confirm(
            "Start the restore without a plan?", default=False, err=True
        ):
            err.print("nothing started")
            return EXIT_FAILED
    else:
        shown.print(plan_view(planned, backend.snapshot_now()))
        if dry_run:
            shown.print(Text("dry run: nothing was started", style="dim"))
            return 0
        if not yes and not typer.confirm(
            f"Start this restore of {planned.plan.array}?", default=False, err=True
        ):
            err.print("nothing started")
            return EXIT_FAILED
        payload = confirmed_input(payload, planned)
    return start_and_follow(
        backend=backend, workflow="restore", payload=payload, wait=wait, out=out, err=err
    )


def confirmed_input(payload: dict[str, Any], planned: RestorePlan) -> dict[str, Any]:
    """The input of the run the plan showed: what was confirmed is what runs. "latest" could
    name a newer set by the time the run starts, the array's instance could be another (a
    move recorded, a tag changed), and auto could decide differently (FSR turned on or off for
    the set): the set, the target and a single strategy auto settled on are pinned. The run's
    Prepare still checks the pinned target (it refuses one that is no longer running, or no
    longer tagged for the array nor recorded or configured for it), so a pin never takes the
    restore anywhere the plan did not show. A per-member mix is left to auto: the input has no
    field for it."""
    plan = planned.plan
    pinned = {**payload, "setId": plan.setId, "targetInstanceId": plan.targetInstanceId}
    chosen = plan.initialization
    if chosen.requested == "auto" and chosen.used in ("fsr", "rate", "prewarm", "none"):
        pinned["initialization"] = chosen.used
        pinned.pop("initializationRate", None)
        if chosen.used == "rate" and chosen.rate:
            pinned["initializationRate"] = chosen.rate
    return pinned


def _refused(
    refused: PlanRefusedError, payload: dict[str, Any], backend: Backend, err: Console
) -> int:
    if refused.name == "InvalidInput" and refused.field:
        option, problem = inputs.option_and_problem(refused.field, refused.cause)
        key = refused.field.split(".", 1)[0]
        hint = f"'{option}'" if key in payload else inputs.DEFAULT_OF.get(key, f"'{option}'")
        raise typer.BadParameter(problem, param_hint=hint)
    err.print(Text.assemble((f"refused: {refused.name}: ", "bold red"), refused.cause))
    err.print(Text("nothing was started", style="dim"))
    if refused.name in NOT_FOUND:
        now = backend.snapshot_now()
        array = str(payload["array"])
        listed = known.sets_lines(array, now)
        if listed:
            err.print(Text(f"sets of {array}, newest first:"))
            for line in listed:
                err.print(Text(f"  {line}"))
        else:
            arrays = known.arrays_lines(now)
            err.print(
                Text("arrays here:" if arrays else "no array here has a set or a tagged instance")
            )
            for line in arrays:
                err.print(Text(f"  {line}"))
    return EXIT_FAILED


def restore(
    *,
    array: Array,
    set_id: SetOption = None,
    target_instance: Annotated[
        str | None,
        typer.Option("--target", help="Instance to restore onto (default: the array's)."),
    ] = None,
    initialization: InitializationOption = None,
    rate: Rate = None,
    volume_type: Annotated[
        VolumeType | None,
        typer.Option("--volume-type", help="Default: as recorded on the snapshots."),
    ] = None,
    iops: Annotated[int | None, typer.Option("--iops", help="gp3, io1 and io2 only.")] = None,
    throughput: Annotated[int | None, typer.Option("--throughput", help="MiB/s, gp3 only.")] = None,
    mount_point: Annotated[
        str | None,
        typer.Option("--mount-point", help="Default: as recorded on the set."),
    ] = None,
    mode: Annotated[
        inputs.Mode | None,
        typer.Option(
            "--mode",
            help="attach (default: the target has no copy of the array mounted) or replace "
            "(release the broken array first, keep its old members).",
        ),
    ] = None,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Assemble and mount read-only.")
    ] = False,
    md_device: Annotated[
        str | None,
        typer.Option(
            "--md-device",
            help="The md device to assemble as (default: as recorded on the set); a read-only "
            "copy next to the array needs one of its own, such as /dev/md10.",
        ),
    ] = None,
    yes: Yes = False,
    dry_run: DryRun = False,
    wait: Wait = True,
    emulation: EmulationFlag = False,
    seed_backups: SeedBackups = 0,
    region: Region = None,
    profile: Profile = None,
    stack: Stack = "raidsnap",
) -> None:
    """Restore a snapshot set of ARRAY: show the plan, ask, follow the run.

    Only the options given go into the execution input; the workflow fills in the rest (the
    plan shows what it would choose). On a terminal the command asks before it starts; --yes
    starts without asking, --dry-run shows the plan only."""
    target = target_of(emulation, seed_backups, region, profile, stack)
    no_wait_on_emulation(target, wait)
    try:
        payload = inputs.restore_input(
            array,
            set_id=set_id,
            target=target_instance,
            initialization=initialization,
            rate=rate,
            volume_type=volume_type,
            iops=iops,
            throughput=throughput,
            mount_point=mount_point,
            mode=mode,
            read_only=read_only,
            md_device=md_device,
        )
    except inputs.InputError as error:
        raise bad(error) from None
    refuse_unattended(yes, dry_run)
    out, err = consoles()
    with opened(target, err) as backend:
        code = plan_then_start(
            backend, payload, yes=yes, dry_run=dry_run, wait=wait, out=out, err=err
        )
    raise typer.Exit(code)


def recover(
    *,
    array: Array,
    set_id: SetOption = None,
    initialization: InitializationOption = None,
    rate: Rate = None,
    yes: Yes = False,
    dry_run: DryRun = False,
    wait: Wait = True,
    emulation: EmulationFlag = False,
    seed_backups: SeedBackups = 0,
    region: Region = None,
    profile: Profile = None,
    stack: Stack = "raidsnap",
) -> None:
    """Put ARRAY back in service on its own instance: restore --mode replace.

    The newest complete set (or --set) is restored onto the array's instance; the broken array
    there is released and its members detached and kept (tagged raidsnap:replaced-by). The plan
    shows which, and what is created, before anything starts."""
    target = target_of(emulation, seed_backups, region, profile, stack)
    no_wait_on_emulation(target, wait)
    try:
        payload = inputs.restore_input(
            array, set_id=set_id, initialization=initialization, rate=rate, mode="replace"
        )
    except inputs.InputError as error:
        raise bad(error) from None
    refuse_unattended(yes, dry_run)
    out, err = consoles()
    with opened(target, err) as backend:
        code = plan_then_start(
            backend, payload, yes=yes, dry_run=dry_run, wait=wait, out=out, err=err
        )
    raise typer.Exit(code)
