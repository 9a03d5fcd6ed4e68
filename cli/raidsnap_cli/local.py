"""``raidsnap local``: a local world that lives on between commands, and ``--local``, which
points any command at it.

``raidsnap local up`` starts the world in the background (raidsnap_emulation.local_world: the
emulation, with the demo's array db1 backed up once, behind an AWS endpoint on a loopback port);
``raidsnap --local COMMAND`` (or RAIDSNAP_LOCAL=1) runs COMMAND against it; ``raidsnap local
break`` breaks something in it; ``raidsnap local down`` ends it. Where it runs: local_state.py.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Annotated, Any, NoReturn

import boto3
import typer
from rich.console import Console
from rich.text import Text

from raidsnap import clients

from .backends import Backend, BackendError
from .local_state import (
    LOG_FILE,
    World,
    WorldError,
    alive,
    control,
    recorded,
    running,
    start,
    state_dir,
    stop,
    world_now,
)
from .resolve import lock_table, manifest_table

# Real seconds between two looks at a running execution: at 60x, half a minute of emulated time.
POLL_SECONDS = 0.5
DEFAULT_SPEED = 60.0
# What a command against the world must not take from this shell: another account to call, or
# real keys to sign with (the world takes any).
_ACCOUNT_VARIABLES = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL")

app = typer.Typer(
    name="local",
    short_help="A local world that lives on between commands; --local points any command at it.",
    help=(
        "A local world that lives on between commands: the emulation (the synthesized "
        "workflows, the functions, EC2 and SSM as they behave) behind an AWS endpoint on "
        "127.0.0.1, seeded with array db1 backed up once. Point any command at it with "
        "`raidsnap --local COMMAND` (or RAIDSNAP_LOCAL=1) until `raidsnap local down`."
    ),
    no_args_is_help=True,
)


class _Choice:
    local = False


_choice = _Choice()


# ---------------------------------------------------------------------- --local


def choose(
    local: Annotated[
        bool,
        typer.Option(
            "--local",
            envvar="RAIDSNAP_LOCAL",
            help=(
                "Run the command against the local world that `raidsnap local up` started, "
                "instead of AWS; it lives on between commands until `raidsnap local down`."
            ),
        ),
    ] = False,
) -> None:
    # No docstring: the command's help stays the app's own.
    _choice.local = local


def chosen() -> bool:
    return _choice.local


@contextlib.contextmanager
def backend(target: Any) -> Iterator[Backend]:
    """The commands' backend for the local world: every client of this command (its own and
    the domain modules') goes to the world's endpoint, with keys of no account."""
    if target.emulation:
        raise BackendError("--local and --emulation are two different worlds: choose one")
    if target.region or target.profile:
        raise BackendError("--region and --profile choose an AWS account; the local world has none")
    world = running()
    if world is None:
        raise BackendError("no local world runs: start one with `raidsnap local up`")
    with _pointed_at(world):
        session = boto3.Session(region_name=world.region)
        yield Backend(
            sfn=session.client("stepfunctions"),
            snapshot_now=lambda: _now(world),
            poll_seconds=POLL_SECONDS,
            description=f"the local world at {world.url}",
            outlives_command=True,
            _resolve=lambda: (dict(world.state_machines), "the local world"),
            # The world's runs are on its clock: their times are in their histories.
            history_times=True,
            _resolve_sets=lambda: manifest_table(
                session.client("cloudformation"), session.client("dynamodb"), "raidsnap"
            ),
            _resolve_lock=lambda: lock_table(
                session.client("cloudformation"), session.client("dynamodb"), "raidsnap"
            ),
        )


def _now(world: World) -> Any:
    try:
        return world_now(world)
    except WorldError as err:
        raise BackendError(str(err)) from None


@contextlib.contextmanager
def _pointed_at(world: World) -> Iterator[None]:
    """Inside the block, the AWS clients this process makes talk to the world."""
    saved = dict(os.environ)
    for key in list(os.environ):
        if key.startswith(_ACCOUNT_VARIABLES):
            del os.environ[key]
    os.environ.update(
        AWS_ENDPOINT_URL=world.url,
        AWS_ACCESS_KEY_ID="local",
        AWS_SECRET_ACCESS_KEY="local",  # noqa: S106 - no account's key: the world takes any
        AWS_DEFAULT_REGION=world.region,
    )
    boto3.setup_default_session(region_name=world.region)
    clients.reset()
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        boto3.DEFAULT_SESSION = None
        clients.reset()


# ---------------------------------------------------------------------- commands


def _consoles() -> tuple[Console, Console]:
    width = None if sys.stdout.isatty() else 160
    out = Console(highlight=False, width=width)
    return out, Console(stderr=True, highlight=False, width=width)


def _fail(err: Console, message: str) -> NoReturn:
    err.print(Text(f"error: {message}", style="red"))
    raise typer.Exit(1)


def _clock_words(speed: float) -> str:
    unit, amount = ("second", speed) if speed < 60 else ("minute", speed / 60)
    per_second = f"{amount:g} emulated {unit}{'' if amount == 1 else 's'}"
    return (
        f"emulated time runs {speed:g}x real time ({per_second} a second) while every run "
        "waits,\n           and stands still while a step works; snapshot times and ages are "
        "emulated time"
    )


def _clock_line(seen: dict[str, Any]) -> str:
    at = f"{str(seen['now'])[:19].replace('T', ' ')} UTC (emulated)"
    if seen.get("paused"):
        return f"{at}, stopped: `raidsnap local clock --resume` lets it run on"
    return f"{at}, {float(seen['speed']):g}x real time"


@app.command()
def up(
    speed: Annotated[
        float,
        typer.Option(
            "--speed",
            min=1,
            max=3600,
            help="Emulated seconds per real second while the runs wait (60: a minute a second).",
        ),
    ] = DEFAULT_SPEED,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Real seconds to wait for the world to serve.")
    ] = 300,
) -> None:
    """Start the local world in the background, seeded with array db1 backed up once."""
    out, err = _consoles()
    world = running()
    if world is None:
        with err.status("building the local world: synthesizing, seeding db1, a first backup…"):
            try:
                world = start(speed, timeout)
            except WorldError as error:
                _fail(err, str(error))
        verb = "up"
    else:
        verb = "already up"
    try:
        seen = control(world, "world")
    except WorldError as error:
        _fail(err, str(error))
    out.print(Text.assemble(("local world ", "bold"), (verb, "bold green"), f" at {world.url}"))
    out.print(f"  process  {world.pid}; log {state_dir() / LOG_FILE}")
    for array in seen["arrays"]:
        out.print(f"  array    {_array_line(array)}")
    out.print(f"  backed   up once: set {seen['seededSet']}")
    out.print(f"  drills   onto {seen['drillInstance']}")
    out.print(f"  clock    {_clock_words(world.speed)}")
    out.print("  use it   raidsnap --local sets · raidsnap --local backup db1 --no-wait ·")
    out.print("           raidsnap --local status · raidsnap local break db1 --member 1 ·")
    out.print("           raidsnap --local backup db1 --with logs --consistency fsfreeze")
    out.print(
        f"  any SDK  AWS_ENDPOINT_URL={world.url}, any keys, region {world.region}"
        " (aws ec2 describe-volumes ...)"
    )
    out.print("  end it   raidsnap local down")


def _array_line(array: dict[str, Any]) -> str:
    members = ", ".join(array["members"])
    return (
        f"{array['name']} on {array['instanceId']} ({array['availabilityZone']}): "
        f"{array['mdDevice']} {array['state']} at {array['mountPoint']}; members {members}"
    )


@app.command()
def down(
    timeout: Annotated[
        float, typer.Option("--timeout", help="Real seconds to wait for it to end.")
    ] = 30,
) -> None:
    """End the local world (its recorded process, and only while it is still that process)."""
    out, err = _consoles()
    world = alive()
    if world is None:
        out.print("no local world runs; nothing to end")
        return
    if not stop(world, timeout):
        _fail(err, f"the local world (process {world.pid}) did not end")
    where = "that was starting" if world.starting else f"at {world.url}"
    out.print(f"local world {where} ended (process {world.pid})")


@app.command()
def status() -> None:
    """Whether the local world runs, where, its emulated time and its arrays (exit 1: none)."""
    out, err = _consoles()
    world = running()
    if world is None:
        found, building = recorded(), alive()
        if building is not None:
            out.print(f"a local world is being built (process {building.pid}); not serving yet")
        elif found is not None:
            out.print(f"no local world runs (the one of process {found.pid} is gone)")
        else:
            out.print("no local world runs; start one with `raidsnap local up`")
        raise typer.Exit(1)
    try:
        seen = control(world, "world")
    except WorldError as error:
        _fail(err, str(error))
    out.print(Text.assemble(("local world ", "bold"), ("up", "bold green"), f" at {world.url}"))
    out.print(f"  process  {world.pid}; state {state_dir()}")
    out.print(f"  now      {_clock_line(seen)}")
    for array in seen["arrays"]:
        out.print(f"  array    {_array_line(array)}")


@app.command(name="break")
def break_(
    array: Annotated[str, typer.Argument(help="The array to break.")],
    member: Annotated[
        int | None,
        typer.Option("--member", min=0, help="Lose this member (its slot): EC2 detaches it."),
    ] = None,
    assemble: Annotated[
        bool,
        typer.Option("--assemble", help="Make the next assemble document fail, as mdadm would."),
    ] = False,
) -> None:
    """Break something in the local world: lose a member of ARRAY, or make the next restore's
    assemble fail (the restore then cleans up what it created and says so)."""
    out, err = _consoles()
    if (member is None) == (not assemble):
        raise typer.BadParameter("give --member N or --assemble (one of them)")
    world = running()
    if world is None:
        _fail(err, "no local world runs: start one with `raidsnap local up`")
    try:
        if member is not None:
            lost = control(world, "break-member", {"array": array, "member": member})
        else:
            failing = control(world, "fail-assemble", {"array": array})
    except WorldError as error:
        _fail(err, str(error))
    if member is not None:
        out.print(
            f"member {lost['member']} of {lost['array']} ({lost['volumeId']}) is lost: EC2 "
            f"detached it from {lost['instanceId']} (forced), and {lost['mdDevice']} failed "
            "(RAID 0 has no redundancy)"
        )
        out.print(f"  restore it: raidsnap --local restore {array} --mode replace")
        return
    out.print(f"the next assemble document fails: {failing['message']}")
    out.print(
        f"  a restore then fails after creating its volumes, and removes them: "
        f"raidsnap --local restore {array} --mode replace"
    )


@app.command()
def clock(
    speed: Annotated[
        float | None,
        typer.Option("--speed", min=1, max=3600, help="Emulated seconds per real second."),
    ] = None,
    pause: Annotated[
        bool, typer.Option("--pause", help="Stop emulated time: runs stay where they are.")
    ] = False,
    resume: Annotated[bool, typer.Option("--resume", help="Let emulated time run on.")] = False,
) -> None:
    """The local world's clock: show it, change its speed, stop it (to look at a run mid-way)
    or let it run on."""
    out, err = _consoles()
    if pause and resume:
        raise typer.BadParameter("--pause or --resume, not both")
    world = running()
    if world is None:
        _fail(err, "no local world runs: start one with `raidsnap local up`")
    body: dict[str, Any] = {"speed": speed, "paused": True if pause else False if resume else None}
    try:
        seen = control(world, "clock", body)
    except WorldError as error:
        _fail(err, str(error))
    out.print(f"clock  {_clock_line(seen)}")
