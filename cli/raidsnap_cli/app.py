"""The ``raidsnap`` command: sets, backup, restore, recover, status, drill, cancel, move, doctor,
tag-protection-policy. Each command lives in a module of its own where it is more than a few
lines; this module builds the app and registers them.

Exit codes: 0 the run succeeded (or the question was answered), 1 the run failed or AWS could
not be asked (the error is shown), 2 bad usage (nothing was started), 3 the run timed out or was
aborted, 130 interrupted while following (the run goes on)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import replace
from typing import Annotated, Any

import boto3
import typer
from botocore.exceptions import BotoCoreError, ClientError
from rich.console import Console
from rich.text import Text

from raidsnap.aws import error_code, snapshot_locks, snapshot_sets
from raidsnap.models import Consistency
from raidsnap.sets import SnapshotSet

from . import doctor as doctor_command
from . import inputs, local, move, queries, restoring, runs, status, trust
from .common import (
    EXIT_FAILED,
    EmulationFlag,
    Profile,
    Region,
    SeedBackups,
    Stack,
    Wait,
    aws_failed,
    bad,
    consoles,
    no_wait_on_emulation,
    opened,
    start_and_follow,
    target_of,
)
from .copy_words import copy_lines
from .views import set_rows, sets_table

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


# ---------------------------------------------------------------------- commands


# ``sets`` lists; ``sets adopt`` (adopt.py) records sets again from their tags.
sets_app = typer.Typer(add_completion=False)
app.add_typer(sets_app, name="sets")


@sets_app.callback(invoke_without_command=True)
def sets(
    ctx: typer.Context,
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
    """Snapshot sets per array, newest first: complete or why not, which one is latest, and
    what snapshot locks hold.

    Arrays are found by the raidsnap:array tag on this account's snapshots.

    `raidsnap sets adopt ARRAY` records an array's sets again from their tags."""
    if ctx.invoked_subcommand is not None:
        return
    target = target_of(emulation, seed_backups, region, profile, stack)
    out, err = consoles()
    with opened(target, err) as backend:
        backend.read_sets()
        names = [array] if array else queries.arrays_with_snapshots()
        if not names:
            out.print("no snapshot sets: no snapshot here is tagged raidsnap:array")
            return
        now = backend.snapshot_now()
        locks = _LockLookup(err)
        for name in names:
            found = snapshot_sets.listing(name)
            rows = set_rows(found.sets, now, locks.holding(found.sets))
            by_id = {s.set_id: s for s in found.sets}
            rows = [replace(r, copies=tuple(copy_lines(by_id[r.set_id]))) for r in rows]
            if not rows:
                out.print(Text(f"array {name}: no snapshot sets"))
            else:
                out.print(sets_table(name, rows))
            if found.unrecorded_ids:
                out.print(
                    Text(
                        f"  {len(found.unrecorded_ids)} snapshots tagged raidsnap:array={name} "
                        "are in no set raidsnap recorded; retention never deletes them. If "
                        "they are raidsnap's own sets (a lost or new set table): raidsnap "
                        f"sets adopt {name}",
                        style="dim",
                    )
                )


class _LockLookup:
    """The snapshot locks that hold the sets' snapshots (DescribeLockedSnapshots). Without
    permission to ask, the sets are listed without their locks, and that is said once."""

    def __init__(self, err: Console) -> None:
        self._err = err
        self._refused = False

    def holding(self, sets: Iterable[SnapshotSet]) -> dict[str, snapshot_locks.SnapshotLock]:
        if self._refused:
            return {}
        try:
            return snapshot_locks.holding(m.snapshot_id for s in sets for m in s.members)
        except ClientError as exc:
            self._refused = True
            self._err.print(
                Text(
                    f"snapshot locks not shown: DescribeLockedSnapshots answered "
                    f"{error_code(exc)} (it needs ec2:DescribeLockedSnapshots)",
                    style="yellow",
                )
            )
            return {}


@app.command()
def backup(
    *,
    array: Annotated[str, typer.Argument(help="The array, as its raidsnap:array tag names it.")],
    consistency: Annotated[
        Consistency | None,
        typer.Option(
            "--consistency",
            help="crash (default of the workflow) or fsfreeze (freeze the filesystem around "
            "the snapshot; with --with, every array's).",
        ),
    ] = None,
    take_with: Annotated[
        list[str] | None,
        typer.Option(
            "--with",
            metavar="ARRAY",
            help="Another array of the same instance to take in the same CreateSnapshots call "
            "(one point in time for all, a set each); repeat for more, up to 8.",
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
    target = target_of(emulation, seed_backups, region, profile, stack)
    no_wait_on_emulation(target, wait)
    try:
        payload = inputs.backup_input(array, consistency, take_with or ())
    except inputs.InputError as error:
        raise bad(error) from None
    out, err = consoles()
    with opened(target, err) as backend:
        code = start_and_follow(
            backend=backend,
            workflow="backup",
            payload=payload,
            wait=wait,
            out=out,
            err=err,
        )
    raise typer.Exit(code)


app.command()(restoring.restore)
app.command()(restoring.recover)
app.command()(status.status)
app.command()(runs.drill)
app.command()(runs.cancel)


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
    target = target_of(emulation, seed_backups, region, profile, stack)
    out, err = consoles()
    with opened(target, err) as backend:
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


app.command(name="doctor")(doctor_command.doctor)


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
    _, err = consoles()
    try:
        session = _session(region, profile)
        identity = session.client("sts").get_caller_identity()
        partition = identity["Arn"].split(":")[1]
        roles = trust.stack_roles(
            session.client("cloudformation"), stack, partition, identity["Account"]
        )
    except (ClientError, BotoCoreError) as error:
        aws_failed(error, err)
    sys.stdout.write(
        json.dumps(trust.scp_document(partition, [*roles, *(admin or [])]), indent=2) + "\n"
    )


def main() -> None:
    app(prog_name="raidsnap")


# Registers ``sets adopt`` on sets_app; imported last, as it uses what this module defines.
from . import adopt as _adopt  # noqa: E402, F401
