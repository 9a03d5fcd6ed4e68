"""``raidsnap sets adopt ARRAY``: record an array's sets again from their snapshots' tags, after
the manifest table was lost or a stack was deployed afresh with an empty one.

It shows, per set found by its tags, what it would record (the members by slot, when the set was
taken, its md UUID, whether it is complete) or why it refuses the set, then asks. What it records
is what the backup records when it takes a set (raidsnap.aws.manifests), so a restore accepts an
adopted set exactly as a backup's. A set the table already records is never overwritten; one it
records otherwise than its snapshots say is reported.

Exit codes: 0 every set is recorded (now or before), 1 a set was refused or recorded otherwise,
the operator said no, or AWS could not be asked, 2 bad usage."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from raidsnap.aws import adoption
from raidsnap.models import MD_UUID_PATTERN
from raidsnap.plan.adoption import Group, Review
from raidsnap.text import degraded_because

from .app import sets_app
from .common import (
    EXIT_FAILED,
    EmulationFlag,
    Profile,
    Region,
    SeedBackups,
    Stack,
    consoles,
    opened,
    target_of,
)
from .views import utc


def _status(group: Group) -> str:
    manifest = group.manifest
    if manifest is None:
        return "refused"
    if manifest.degraded:
        return (
            f"degraded ({degraded_because(manifest.missing_slots)}): recorded "
            "as such, never restored as latest"
        )
    if not re.fullmatch(MD_UUID_PATTERN, manifest.md.get("uuid", "")):
        return "complete, without an md UUID: a restore of it needs mdUuid"
    return "complete"


def _head(group: Group, verdict: str, style: str) -> Text:
    return Text.assemble((f"  {group.set_id}", "bold"), (f"  {verdict}", style))


def _recorded_lines(group: Group) -> list[Text]:
    """A set the table records: never rebuilt; said when its snapshots tell otherwise."""
    if group.already_recorded:
        return [_head(group, "already recorded", "dim")]
    recorded = group.recorded
    assert recorded is not None
    lines = [
        _head(group, "recorded otherwise", "yellow"),
        Text(
            f"      the table's record is kept: it lists "
            f"{dict(sorted(recorded.snapshots.items())) or 'no snapshots'}"
        ),
    ]
    if group.manifest is not None:
        lines.append(
            Text(f"      its snapshots say {dict(sorted(group.manifest.snapshots.items()))}")
        )
    return lines + [Text(f"      - its snapshots' tags: {why}") for why in group.refusals]


def _lines(group: Group) -> list[Text]:
    """One set: its verdict, then what would be recorded or why not."""
    if group.recorded is not None:
        return _recorded_lines(group)
    if group.refusals:
        return [
            _head(group, "refused", "red"),
            *(Text(f"      - {why}") for why in group.refusals),
        ]
    manifest = group.manifest
    assert manifest is not None
    members = ", ".join(f"{slot} {sid}" for slot, sid in sorted(manifest.snapshots.items()))
    md = manifest.md
    device = f"({md['device']})" if md.get("device") else ""
    where = " ".join(x for x in (md.get("mountPoint", ""), device) if x)
    src = manifest.source
    origin = [Text(f"      copy of   a set of {src.get('account')} in {src.get('region')}")]
    return [
        _head(group, "to record", "green"),
        Text(f"      members   {manifest.member_count}: {members}"),
        *(origin if src else []),
        Text(f"      taken at  {utc(group.taken_at)}"),
        Text(f"      md UUID   {md.get('uuid') or 'none recorded'}"),
        Text(f"      mounted   {where or 'not recorded'}"),
        Text(f"      status    {_status(group)}"),
    ]


def show(found: Review, out: Console) -> None:
    """What adopting would do for every set of the array, oldest first."""
    if not found.groups:
        out.print(Text(f"array {found.array}: no snapshot here carries a set id of it"))
    else:
        out.print(Text(f"array {found.array}: {len(found.groups)} sets found by their tags"))
    for group in found.groups:
        for line in _lines(group):
            out.print(line, soft_wrap=True)
    if found.without_set_id:
        out.print(
            Text(
                f"  {len(found.without_set_id)} snapshots tagged with {found.array} carry no "
                "set id and belong to no set: left alone",
                style="dim",
            )
        )


def adopt(array: str, *, dry_run: bool, confirm: Callable[[str], bool], out: Console) -> int:
    """Show, ask, record; the exit code."""
    found = adoption.look(array)
    show(found, out)
    todo = found.adoptable
    trouble = bool(found.refused or found.conflicting)
    if not todo:
        out.print("nothing to record")
        return EXIT_FAILED if trouble else 0
    if dry_run:
        out.print(f"dry run: {len(todo)} sets would be recorded; nothing recorded")
        return EXIT_FAILED if trouble else 0
    if not confirm(f"Record {len(todo)} sets of {array} from their tags?"):
        out.print("nothing recorded")
        return EXIT_FAILED
    done = adoption.record(todo)
    for set_id in done.written:
        out.print(Text(f"recorded {set_id}", style="green"))
    for set_id in done.taken_meanwhile:
        out.print(Text(f"not recorded {set_id}: the table recorded it meanwhile", style="yellow"))
    if done.written:
        out.print(f"next: raidsnap sets --array {array} shows them; a restore finds them")
    return EXIT_FAILED if trouble or done.taken_meanwhile else 0


@sets_app.command("adopt")
def adopt_command(
    *,
    array: Annotated[str, typer.Argument(help="The array, as its raidsnap:array tag names it.")],
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be recorded; record nothing.")
    ] = False,
    emulation: EmulationFlag = False,
    seed_backups: SeedBackups = 0,
    region: Region = None,
    profile: Profile = None,
    stack: Stack = "raidsnap",
) -> None:
    """Record ARRAY's sets again from their snapshots' tags, after showing what it would record.

    For a lost set table, or a stack deployed afresh with an empty one.
    A set whose members disagree is refused, and says why.
    A set the table records is never overwritten.
    Needs ec2:DescribeSnapshots, and dynamodb:Query and PutItem on the set table."""
    target = target_of(emulation, seed_backups, region, profile, stack)
    out, err = consoles()
    with opened(target, err) as backend:
        backend.read_sets()
        code = adopt(
            array,
            dry_run=dry_run,
            confirm=lambda q: yes or typer.confirm(q, default=False, err=True),
            out=out,
        )
    raise typer.Exit(code)
