"""The ``raidsnap`` command: sets, backup, restore, status, move, doctor, tag-protection-policy.

Exit codes: 0 the run succeeded (or the question was answered), 1 the run failed or AWS could
not be asked (the error is shown), 2 bad usage (nothing was started), 3 the run timed out or was
aborted, 130 interrupted while following (the run goes on)."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn

import boto3
import typer
from botocore.exceptions import BotoCoreError, ClientError
from rich.console import Console
from rich.segment import Segment
from rich.text import Text

from raidsnap.aws import snapshot_sets
from raidsnap.models import Consistency, Initialization, RestoreMode, VolumeType
from raidsnap.text import printable

from . import backends, costs, inputs, local, move, queries, trust
from .backends import AwsOptions, Backend, BackendError
from .follow import follow, new_events
from .views import (
    error_view,
    execution_row_cells,
    executions_table,
    human_duration,
    key_values,
    output_view,
    set_rows,
    sets_table,
    status_text,
    utc,
)

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_TIMED_OUT = 3
EXIT_INTERRUPTED = 130

app = typer.Typer(
    name="raidsnap",
    help=(
        "Snapshot sets, backups and restores of mdadm RAID arrays on EBS, through raidsnap's "
        "Step Functions workflows.\n\n"
        "Against AWS by default (the standard credential chain; --profile, --region, --stack). "
        "With --emulation, against a local emulation that lives only inside this one command."
    ),
    epilog=(
        "Exit codes: 0 succeeded (or answered), 1 the run failed or AWS could not be asked, "
        "2 bad usage (nothing started), 3 the run timed out or was aborted, "
        "130 interrupted while following (the run goes on)."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(local.app)
app.callback()(local.choose)  # --local (RAIDSNAP_LOCAL=1): every command against the local world


# Choices are the workflow input's own (raidsnap.models): a typo is a usage error naming them.
Mode = RestoreMode


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
            "when it ends: nothing carries over to the next command. Snapshot times and ages "
            "are emulated time; execution times are this machine's clock."
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


@dataclass(frozen=True)
class Target:
    emulation: bool
    seed_backups: int
    region: str | None
    profile: str | None
    stack: str


def _target(
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


def _consoles() -> tuple[Console, Console]:
    """Results on stdout, progress and errors on stderr. Not on a terminal, lines are long
    enough that set ids and causes are never cut."""
    out = SafeConsole(highlight=False, width=None if sys.stdout.isatty() else 160)
    err = SafeConsole(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)
    return out, err


@contextlib.contextmanager
def _backend(target: Target, err: Console) -> Iterator[Backend]:
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
        _aws_failed(error, err)


def _aws_failed(error: ClientError | BotoCoreError, err: Console) -> NoReturn:
    """An AWS error as one red line, and exit code 1."""
    if isinstance(error, ClientError):
        info = error.response.get("Error", {})
        err.print(Text(f"AWS error {info.get('Code')}: {info.get('Message')}", style="red"))
    else:
        err.print(Text(f"AWS error: {error}", style="red"))
    raise typer.Exit(EXIT_FAILED) from None


def _bad(error: inputs.InputError) -> typer.BadParameter:
    return typer.BadParameter(error.problem, param_hint=f"'{error.option}'")


def _exit_code(status: str) -> int:
    if status == "SUCCEEDED":
        return 0
    if status in ("TIMED_OUT", "ABORTED"):
        return EXIT_TIMED_OUT
    return EXIT_FAILED


def _start_and_follow(
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
        stateMachineArn=backend.arn(workflow), name=name, input=_json(payload)
    )
    arn = started["executionArn"]
    err.print(
        Text.assemble(
            ("started ", "dim"),
            (f"{workflow} ", "bold"),
            _json(payload),
            (f" on {backend.description}", "dim"),
        )
    )
    err.print(Text.assemble(("execution ", "dim"), arn))
    if not wait:
        out.print(arn)
        return 0
    return _follow_to_end(backend, workflow, arn, out, err)


def _follow_to_end(backend: Backend, workflow: str, arn: str, out: Console, err: Console) -> int:
    try:
        followed = follow(backend.sfn, arn, err, backend.poll_seconds)
    except KeyboardInterrupt:
        if backend.outlives_command:
            err.print(Text(f"stopped following; the run goes on: raidsnap status {arn} --follow"))
        else:
            err.print(Text("stopped; the emulation, and the run in it, end with this command"))
        raise typer.Exit(EXIT_INTERRUPTED) from None
    info = queries.describe(backend.sfn, arn, workflow)
    _print_outcome(info, out, err)
    return _exit_code(followed.status)


def _print_outcome(info: queries.ExecutionInfo, out: Console, err: Console) -> None:
    took = human_duration((info.stop or datetime.now(UTC)) - info.start)
    headline = Text.assemble(status_text(info.status), f" {info.workflow} {info.name} in {took}")
    if info.status == "SUCCEEDED":
        out.print(headline)
        out.print(output_view(info.workflow, info.output))
    elif info.status == "RUNNING":
        out.print(headline)
    else:
        err.print(headline)
        err.print(error_view(info.error or info.status, info.cause))


def _json(payload: Any) -> str:
    return json.dumps(payload, separators=(",", ":"))


# ---------------------------------------------------------------------- commands


@app.command()
def sets(
    *,
    array: Annotated[
        str | None,
        typer.Option("--array", help="Only this array (default: every array)."),
    ] = None,
    emulation: EmulationFlag = False,
    seed_backups: SeedBackups = 0,
    region: Region = None,
    profile: Profile = None,
    stack: Stack = "raidsnap",
) -> None:
    """Snapshot sets per array, newest first: complete or why not, and which one is latest.

    Arrays are found by the raidsnap:array tag on this account's snapshots."""
    target = _target(emulation, seed_backups, region, profile, stack)
    out, err = _consoles()
    with _backend(target, err) as backend:
        backend.read_sets()
        names = [array] if array else queries.arrays_with_snapshots()
        if not names:
            out.print("no snapshot sets: no snapshot here is tagged raidsnap:array")
            return
        now = backend.snapshot_now()
        for name in names:
            found = snapshot_sets.listing(name)
            rows = set_rows(found.sets, now)
            if not rows:
                out.print(Text(f"array {name}: no snapshot sets"))
            else:
                out.print(sets_table(name, rows))
            if found.unrecorded_ids:
                out.print(
                    Text(
                        f"  {len(found.unrecorded_ids)} snapshots tagged raidsnap:array={name} "
                        "are in no set raidsnap recorded (another tool copied the tags, or "
                        "someone set them); retention never deletes them",
                        style="dim",
                    )
                )


@app.command()
def backup(
    *,
    array: Annotated[str, typer.Argument(help="The array, as its raidsnap:array tag names it.")],
    consistency: Annotated[
        Consistency | None,
        typer.Option(
            "--consistency",
            help="crash (default of the workflow) or fsfreeze (freeze the filesystem around "
            "the snapshot).",
        ),
    ] = None,
    wait: Wait = True,
    emulation: EmulationFlag = False,
    seed_backups: SeedBackups = 0,
    region: Region = None,
    profile: Profile = None,
    stack: Stack = "raidsnap",
) -> None:
    """Take a snapshot set of ARRAY now (trigger "manual") and follow the run."""
    target = _target(emulation, seed_backups, region, profile, stack)
    _no_wait_on_emulation(target, wait)
    try:
        payload = inputs.backup_input(array, consistency)
    except inputs.InputError as error:
        raise _bad(error) from None
    out, err = _consoles()
    with _backend(target, err) as backend:
        code = _start_and_follow(
            backend=backend,
            workflow="backup",
            payload=payload,
            wait=wait,
            out=out,
            err=err,
        )
    raise typer.Exit(code)


def _no_wait_on_emulation(target: Target, wait: bool) -> None:
    if target.emulation and not wait:
        raise typer.BadParameter(
            "the emulation ends with this command, so the run would end with it; "
            "leave --no-wait out",
            param_hint="'--no-wait'",
        )


@app.command()
def restore(
    *,
    array: Annotated[str, typer.Argument(help="The array, as its raidsnap:array tag names it.")],
    set_id: Annotated[
        str | None,
        typer.Option("--set", help='"latest" (the newest complete set) or a set id.'),
    ] = None,
    target_instance: Annotated[
        str | None,
        typer.Option("--target", help="Instance to restore onto (default: the array's)."),
    ] = None,
    initialization: Annotated[
        Initialization | None,
        typer.Option(
            "--initialization",
            help="auto (the quickest to full performance), fsr, rate, prewarm or none "
            "(default: config, else auto).",
        ),
    ] = None,
    rate: Annotated[
        int | None,
        typer.Option("--rate", help="Volume initialization rate, MiB/s (100..300)."),
    ] = None,
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
        Mode | None,
        typer.Option(
            "--mode",
            help="attach (default: the target has no copy of the array mounted) or replace "
            "(release the broken array first, keep its old members).",
        ),
    ] = None,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Assemble and mount read-only.")
    ] = False,
    wait: Wait = True,
    emulation: EmulationFlag = False,
    seed_backups: SeedBackups = 0,
    region: Region = None,
    profile: Profile = None,
    stack: Stack = "raidsnap",
) -> None:
    """Restore a snapshot set of ARRAY onto an instance and follow the run.

    Only the options given go into the execution input; the workflow fills in the rest."""
    target = _target(emulation, seed_backups, region, profile, stack)
    _no_wait_on_emulation(target, wait)
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
        )
    except inputs.InputError as error:
        raise _bad(error) from None
    out, err = _consoles()
    with _backend(target, err) as backend:
        code = _start_and_follow(
            backend=backend,
            workflow="restore",
            payload=payload,
            wait=wait,
            out=out,
            err=err,
        )
    raise typer.Exit(code)


@app.command()
def status(
    *,
    execution: Annotated[
        str | None,
        typer.Argument(help="An execution ARN or name: show it in detail."),
    ] = None,
    array: Annotated[str | None, typer.Option("--array", help="Only runs of this array.")] = None,
    last: Annotated[
        int,
        typer.Option("--last", min=1, max=100, help="How many recent runs to list."),
    ] = 10,
    follow_run: Annotated[
        bool,
        typer.Option("--follow", help="With EXECUTION: follow it if it is still running."),
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="With EXECUTION: the deployment's config file; its prices: section overrides "
            "the list prices the run's cost is computed with.",
        ),
    ] = None,
    emulation: EmulationFlag = False,
    seed_backups: SeedBackups = 0,
    region: Region = None,
    profile: Profile = None,
    stack: Stack = "raidsnap",
) -> None:
    """Recent runs of the backup and restore workflows, or one run in detail."""
    target = _target(emulation, seed_backups, region, profile, stack)
    if follow_run and execution is None:
        raise typer.BadParameter("needs an EXECUTION to follow", param_hint="'--follow'")
    out, err = _consoles()
    with _backend(target, err) as backend:
        machines = backend.state_machines
        if execution is None:
            runs = queries.recent(backend.sfn, machines, last, array)
            now = datetime.now(UTC)
            rows = [execution_row_cells(r, now) for r in runs]
            scope = f" of array {array}" if array else ""
            if not rows:
                out.print(f"no runs{scope} of the {' or '.join(sorted(machines))} workflow")
                return
            out.print(executions_table(rows, f"last {len(rows)} runs{scope}"))
            return
        info = queries.find(backend.sfn, machines, execution)
        if follow_run and info.status == "RUNNING":
            raise typer.Exit(_follow_to_end(backend, info.workflow, info.arn, out, err))
        _print_details(backend, info, out, err, _price_overrides(config))


def _price_overrides(config: Path | None) -> dict[str, Any]:
    """The ``prices:`` section of a config file (YAML, of which JSON is a part)."""
    if config is None:
        return {}
    try:
        import yaml  # type: ignore[import-untyped]  # noqa: PLC0415 (only --config reads it)

        raw = yaml.safe_load(config.read_text())
    except (OSError, ImportError, ValueError) as err:
        raise typer.BadParameter(str(err), param_hint="'--config'") from None
    prices = raw.get("prices") if isinstance(raw, dict) else None
    if prices is not None and not isinstance(prices, dict):
        raise typer.BadParameter("prices: must be a mapping", param_hint="'--config'")
    return dict(prices or {})


def _print_details(
    backend: Backend,
    info: queries.ExecutionInfo,
    out: Console,
    err: Console,
    prices: dict[str, Any] | None = None,
) -> None:
    steps = [
        str(e["stateEnteredEventDetails"]["name"])
        for e in new_events(backend.sfn, info.arn, 0)
        if str(e["type"]).endswith("StateEntered")
    ]
    took = human_duration((info.stop or datetime.now(UTC)) - info.start)
    out.print(
        key_values(
            [
                ("execution", Text(info.name)),
                ("arn", Text(info.arn)),
                ("workflow", Text(info.workflow)),
                ("status", status_text(info.status)),
                ("started", Text(utc(info.start))),
                ("stopped", Text(utc(info.stop) if info.stop else "-")),
                ("took", Text(took + ("" if info.stop else " so far"))),
                ("input", Text(_json(info.input))),
                ("states", Text(_path(steps))),
                *_cost_row(backend, info, prices or {}),
            ]
        )
    )
    _print_outcome(info, out, err)


def _cost_row(
    backend: Backend, info: queries.ExecutionInfo, prices: dict[str, Any]
) -> list[tuple[str, Text]]:
    """What the run cost at list prices, once it has ended (raidsnap.plan.run_cost)."""
    if info.stop is None:
        return []
    try:
        cost = costs.run_cost_of(backend.sfn, info.arn, prices)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="'--config'") from None
    except ClientError as e:
        return [("cost", Text(f"not computed: {e}"))]
    return [("cost", Text(cost.text()))]


def _path(steps: list[str]) -> str:
    """``Prepare → WaitSnapshots x3 → Retention``: repeats folded."""
    folded: list[tuple[str, int]] = []
    for step in steps:
        if folded and folded[-1][0] == step:
            folded[-1] = (step, folded[-1][1] + 1)
        else:
            folded.append((step, 1))
    return " → ".join(f"{s} x{n}" if n > 1 else s for s, n in folded)


@app.command(name="move")
def move_command(
    *,
    array: Annotated[str, typer.Argument(help="The array, as its raidsnap:array tag names it.")],
    instance_id: Annotated[
        str, typer.Argument(metavar="INSTANCE", help="The instance the array now lives on.")
    ],
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    emulation: EmulationFlag = False,
    seed_backups: SeedBackups = 0,
    region: Region = None,
    profile: Profile = None,
    stack: Stack = "raidsnap",
) -> None:
    """Confirm that ARRAY now lives on INSTANCE (tagged raidsnap:array=ARRAY).

    raidsnap never moves an array on a tag alone.
    Until the move is confirmed, backups from INSTANCE are refused (ArrayInstanceChanged).
    This records the move, and who made it."""
    target = _target(emulation, seed_backups, region, profile, stack)
    out, err = _consoles()
    with _backend(target, err) as backend:
        try:
            done = move.move(
                backend,
                array,
                instance_id,
                confirm=lambda q: yes or typer.confirm(q, default=False, err=True),
                out=out,
            )
        except move.MoveError as error:
            err.print(Text(f"error: {error}", style="red"))
            raise typer.Exit(EXIT_FAILED) from None
    raise typer.Exit(0 if done else EXIT_FAILED)


def _session(region: str | None, profile: str | None) -> Any:
    return boto3.Session(region_name=region, profile_name=profile)


@app.command()
def doctor(region: Region = None, profile: Profile = None, stack: Stack = "raidsnap") -> None:
    """Check what raidsnap relies on in this account; each finding is one line, with the next
    step when something is missing. Today: whether raidsnap:* tags are protected."""
    out, err = _consoles()
    try:
        ok, line = trust.protection_line(_session(region, profile).client("iam"), stack)
    except BotoCoreError as error:
        err.print(Text(f"AWS error: {error}", style="red"))
        raise typer.Exit(EXIT_FAILED) from None
    # One finding, one line, however long: a script can grep it, a person reads it whole.
    out.print(Text(line, style="green" if ok else "yellow"), soft_wrap=True)


@app.command("tag-protection-policy")
def tag_protection_policy(
    admin: Annotated[
        list[str] | None,
        typer.Option(
            "--admin",
            help="An IAM role or user ARN that may still write raidsnap:* tags (repeat for more).",
        ),
    ] = None,
    region: Region = None,
    profile: Profile = None,
    stack: Stack = "raidsnap",
) -> None:
    """Print the tag-protection policy as a service control policy for an AWS Organization:
    the deployed stack's own roles and the --admin ARNs are exempt. This is the one place raw
    JSON is printed: it is meant to be pasted into the Organizations console or saved to a file."""
    _, err = _consoles()
    try:
        session = _session(region, profile)
        identity = session.client("sts").get_caller_identity()
        partition = identity["Arn"].split(":")[1]
        roles = trust.stack_roles(
            session.client("cloudformation"), stack, partition, identity["Account"]
        )
    except (ClientError, BotoCoreError) as error:
        _aws_failed(error, err)
    sys.stdout.write(
        json.dumps(trust.scp_document(partition, [*roles, *(admin or [])]), indent=2) + "\n"
    )


def main() -> None:
    app(prog_name="raidsnap")
