"""``raidsnap status``: recent runs; one run in detail, in words (its steps, counts, milestones);
or an array: what runs for it now (a recovery with the restore it started, a drill with its
restore) and what ran lately. ``--json`` for scripts: the same, as data."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from botocore.exceptions import ClientError
from rich.console import Console
from rich.table import Table
from rich.text import Text

from raidsnap import clients

from . import costs, known, queries
from .backends import Backend
from .common import (
    EmulationFlag,
    Profile,
    Region,
    SeedBackups,
    Stack,
    consoles,
    exit_code,
    follow_progress,
    follow_to_end,
    opened,
    print_outcome,
    target_of,
)
from .follow import line_text, narrate
from .progress import Narrator, ec2_counter
from .views import (
    cost_text,
    describe_input,
    execution_row_cells,
    executions_table,
    human_duration,
    status_text,
    utc,
)

NESTED_SUFFIX = "-restore"  # a recovery names the restore it starts <recovery>-restore


def status(
    *,
    what: Annotated[
        str | None,
        typer.Argument(
            metavar="[EXECUTION|ARRAY]",
            help="An execution ARN or name: that run in detail. An array: what runs for it now "
            "(a recovery with its restore) and its recent runs.",
        ),
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
    as_json: Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")] = False,
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
    """Recent runs of raidsnap's workflows, one run in detail, or one array's runs.

    An array shows what runs for it now (a recovery with the restore it started) and its
    recent runs. --json prints the same as data."""
    target = target_of(emulation, seed_backups, region, profile, stack)
    if follow_run and what is None:
        raise typer.BadParameter("needs an EXECUTION to follow", param_hint="'--follow'")
    prices = costs.price_overrides(config)
    out, err = consoles()
    with opened(target, err) as backend:
        if what is None:
            _list(backend, last, array, as_json, out)
            return
        try:
            info = queries.find(backend.sfn, backend.state_machines, what)
        except queries.ExecutionNotFoundError as missing:
            if what.startswith("arn:") or follow_run:
                raise
            if not _array_known(backend, what):
                arrays = "; ".join(known.arrays_lines(backend.snapshot_now())) or "none"
                raise queries.ExecutionNotFoundError(
                    f"{missing}, and no array {what} here (arrays here: {arrays})"
                ) from None
            _array(backend, what, last, as_json, out)
            return
        if follow_run and info.status == "RUNNING":
            raise typer.Exit(_follow(backend, info, as_json, out, err, prices=prices))
        _details(backend, info, as_json, out, err, prices=prices)


def _follow(
    backend: Backend,
    info: queries.ExecutionInfo,
    as_json: bool,
    out: Console,
    err: Console,
    *,
    prices: dict[str, Any],
) -> int:
    """Follow a running run to its end view; with --json, its progress on stderr and, once it
    ended, on stdout the run as ``status RUN --json`` gives it (its cost included)."""
    if not as_json:
        return follow_to_end(backend, info.workflow, info.arn, out, err, prices=prices)
    followed = follow_progress(backend, info.workflow, info.arn, err)
    _details(backend, info, as_json, out, err, prices=prices)
    return exit_code(followed.status)


def _timed(backend: Backend, info: queries.ExecutionInfo) -> queries.ExecutionInfo:
    return queries.describe(
        backend.sfn, info.arn, info.workflow, timed=True, now=backend.snapshot_now
    )


def _list(backend: Backend, last: int, array: str | None, as_json: bool, out: Console) -> None:
    machines = backend.state_machines
    runs = queries.recent(
        backend.sfn, machines, last, array, timed=backend.history_times, now=backend.snapshot_now
    )
    if as_json:
        out.print_json(json.dumps([_run_json(r) for r in runs], default=str))
        return
    scope = f" of array {array}" if array else ""
    if not runs:
        out.print(f"no runs{scope} of the {' or '.join(sorted(machines))} workflow")
        return
    rows = [execution_row_cells(r, backend.snapshot_now()) for r in runs]
    out.print(executions_table(rows, f"last {len(rows)} runs{scope}"))


def _run_json(info: queries.ExecutionInfo, narrator: Narrator | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "execution": info.name,
        "arn": info.arn,
        "workflow": info.workflow,
        "status": info.status,
        "array": info.array,
        "started": info.start.isoformat(),
        "stopped": info.stop.isoformat() if info.stop else None,
        "seconds": int(info.took.total_seconds()),
        "input": info.input,
        "output": info.output,
        "error": info.error,
        "cause": info.cause,
    }
    if narrator is not None:
        out["now"] = narrator.now_words if info.status == "RUNNING" else None
        out["mounted"] = narrator.mounted
        out["steps"] = [{"at": line.at.isoformat(), "text": line.text} for line in narrator.lines]
    return out


def _told(backend: Backend, info: queries.ExecutionInfo) -> Narrator:
    narrator = narrate(backend.sfn, info.arn, info.workflow)
    narrator.status = info.status
    if info.status == "RUNNING" and info.workflow == "restore" and not backend.history_times:
        counted = ec2_counter(clients.ec2())(narrator.step, narrator.facts)
        if counted is not None:
            narrator.counted(backend.snapshot_now(), f"{counted[0]}/{counted[1]}")
    return narrator


def _details(
    backend: Backend,
    info: queries.ExecutionInfo,
    as_json: bool,
    out: Console,
    err: Console,
    *,
    prices: dict[str, Any],
) -> None:
    info = _timed(backend, info)
    narrator = _told(backend, info)
    nested = _nested(backend, info, narrator)
    cost = costs.cost_lines(backend.sfn, info, prices, backend.snapshot_now())
    if as_json:
        body = _run_json(info, narrator)
        body["nested"] = [_run_json(n, _told(backend, n)) for n in nested]
        body["cost"] = cost
        out.print_json(json.dumps(body, default=str))
        return
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", justify="right")
    grid.add_column()
    grid.add_row("run", Text.assemble((f"{info.workflow} ", "bold"), info.name))
    now = Text.assemble(status_text(info.status))
    if info.status == "RUNNING":
        now.append(f" · {narrator.now_words}", style="bold")
    grid.add_row("status", now)
    grid.add_row("input", describe_input(info.input))
    grid.add_row("started", Text(utc(info.start)))
    grid.add_row("took", Text(human_duration(info.took) + ("" if info.stop else " so far")))
    steps = Text()
    for line in narrator.lines:
        steps.append_text(line_text(line, narrator.started))
        steps.append("\n")
    steps.rstrip()
    grid.add_row("steps", steps)
    for run in nested:
        grid.add_row("runs", _one_line(backend, run))
    if cost is not None:
        grid.add_row("cost", cost_text(cost))
    grid.add_row("arn", Text(info.arn, style="dim"))
    out.print(grid)
    if info.status != "RUNNING":
        print_outcome(info, out, err)


def _nested(
    backend: Backend, info: queries.ExecutionInfo, narrator: Narrator
) -> list[queries.ExecutionInfo]:
    """The restore a recovery (named <recovery>-restore) or a drill (its plan names it) runs."""
    if info.workflow not in ("recovery", "drill") or "restore" not in backend.state_machines:
        return []
    name = info.name + NESTED_SUFFIX if info.workflow == "recovery" else narrator.facts.restore
    if not name:
        return []
    machine = backend.state_machines["restore"]
    arn = machine.replace(":stateMachine:", ":execution:", 1) + ":" + name
    try:
        return [_timed(backend, queries.describe(backend.sfn, arn, "restore"))]
    except ClientError:
        return []


def _one_line(backend: Backend, info: queries.ExecutionInfo) -> Text:
    """``restore NAME · RUNNING · 3m 50s · attaching new volumes 2/3``."""
    narrator = _told(backend, info)
    line = Text.assemble((f"{info.workflow} ", "bold"), info.name, " · ", status_text(info.status))
    line.append(f" · {human_duration(info.took)}")
    if info.status == "RUNNING":
        line.append(f" · {narrator.now_words}", style="bold")
    if narrator.mounted:
        line.append(" · array mounted", style="green")
    return line


def _array_known(backend: Backend, name: str) -> bool:
    backend.read_sets()
    if name in queries.arrays_with_snapshots() or name in known.tagged_arrays():
        return True
    return bool(queries.recent(backend.sfn, backend.state_machines, 1, name))


def _running_of(backend: Backend, array: str) -> list[queries.ExecutionInfo]:
    found = []
    for workflow, machine in sorted(backend.state_machines.items()):
        pages = backend.sfn.get_paginator("list_executions").paginate(
            stateMachineArn=machine, statusFilter="RUNNING"
        )
        for page in pages:
            for e in page["executions"]:
                info = queries.describe(backend.sfn, e["executionArn"], workflow)
                if info.array == array:
                    found.append(_timed(backend, info))
    return found


def _array(backend: Backend, array: str, last: int, as_json: bool, out: Console) -> None:
    running = _running_of(backend, array)
    parents = [r for r in running if r.workflow in ("recovery", "drill")]
    nested = {n.arn: (p, n) for p in parents for n in _nested(backend, p, _told(backend, p))}
    recent = queries.recent(
        backend.sfn,
        backend.state_machines,
        last,
        array,
        timed=backend.history_times,
        now=backend.snapshot_now,
    )
    if as_json:
        body = {
            "array": array,
            "running": [_run_json(r, _told(backend, r)) for r in running],
            "recent": [_run_json(r) for r in recent],
        }
        out.print_json(json.dumps(body, default=str))
        return
    out.print(Text(f"array {array}", style="bold"))
    if not running:
        out.print(Text("  nothing runs for it now", style="dim"))
    for run in running:
        if run.arn in nested:
            continue
        out.print(Text("  ").append_text(_one_line(backend, run)))
        for parent, child in nested.values():
            if parent.arn == run.arn:
                out.print(Text("    └ ").append_text(_one_line(backend, child)))
    if recent:
        now: datetime = backend.snapshot_now()
        out.print(
            executions_table(
                [execution_row_cells(r, now) for r in recent], f"last {len(recent)} runs of {array}"
            )
        )
