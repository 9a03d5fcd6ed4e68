"""Following one execution to its end: a live view on a terminal, one line per step otherwise,
in the words of raidsnap.cli's progress module (steps, counts, milestones), never state names.

The history is read newest first (``reverseOrder``), page by page with ``nextToken`` until a
page reaches an event already seen: a poll costs one call however long the run has been going.
(Read oldest first, the last page carries no token to resume from.) Event ids order the events;
a service that ignores ``reverseOrder`` or paging still yields each event once, in order.

Times are the history's: each event's timestamp, and the run's start as its first event's. On
the emulation those are emulated time (a step that waits an hour there shows an hour)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .progress import Counter, Line, Narrator
from .views import human_duration, status_text

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

HISTORY_PAGE = 100
RECENT_LINES = 8
FINISHED = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")


def new_events(sfn: SFNClient, arn: str, after_id: int) -> list[dict[str, Any]]:
    """Events with an id above ``after_id``, oldest first."""
    fresh: dict[int, dict[str, Any]] = {}
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {
            "executionArn": arn,
            "reverseOrder": True,
            "maxResults": HISTORY_PAGE,
        }
        if token:
            kwargs["nextToken"] = token
        page = sfn.get_execution_history(**kwargs)
        events: list[dict[str, Any]] = list(page["events"])  # type: ignore[arg-type]
        reached_seen = False
        for event in events:
            if int(event["id"]) > after_id:
                fresh[int(event["id"])] = event
            else:
                reached_seen = True
        token = page.get("nextToken")
        if reached_seen or not token:
            break
    return [fresh[i] for i in sorted(fresh)]


def narrate(sfn: SFNClient, arn: str, workflow: str) -> Narrator:
    """The whole history of a run, told (for ``status EXECUTION``)."""
    narrator = Narrator(workflow)
    for event in new_events(sfn, arn, 0):
        narrator.take(event)
    return narrator


def line_text(line: Line, started: datetime | None) -> Text:
    """``03:02:10  +12s     detaching old members 2/3``."""
    offset = human_duration(line.at - started) if started else ""
    text = Text(f"{line.at.astimezone(UTC):%H:%M:%S}  +{offset:<7} ", style="dim")
    text.append(line.text, style=line.style)
    return text


def view(n: Narrator, name: str, now: datetime) -> RenderableType:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim")
    grid.add_column()
    elapsed = human_duration(now - n.started) if n.started else "-"
    grid.add_row("run", Text.assemble((f"{n.workflow} ", "bold"), name))
    grid.add_row("status", Text.assemble(status_text(n.status), f" · {elapsed}"))
    if n.status == "RUNNING":  # once it ended, its last line and the outcome say how
        grid.add_row("now", Text(n.now_words, style="bold"))
    prewarm = n.prewarm_progress(now)
    if prewarm:
        grid.add_row("prewarm", Text(prewarm))
    recent = n.lines[-RECENT_LINES:]
    if recent:
        lines = Text()
        for line in recent:
            lines.append_text(line_text(line, n.started))
            lines.append("\n")
        lines.rstrip()
        grid.add_row("so far", lines)
    return Group(grid)


@dataclass
class Followed:
    status: str
    description: dict[str, Any]
    narrator: Narrator


def follow(
    sfn: SFNClient,
    arn: str,
    console: Console,
    poll_seconds: float,
    *,
    now: Callable[[], datetime] | None = None,
    workflow: str = "",
    counter: Counter | None = None,
) -> Followed:
    """Poll until the execution ends. A terminal gets a live view; anything else (a pipe, a
    log file, a test) gets one line per step, count or milestone, each with its time and the
    time since the start. ``now``: the clock the run's times are on (the emulation's)."""
    clock = now or (lambda: datetime.now(UTC))
    desc: dict[str, Any] = dict(sfn.describe_execution(executionArn=arn))
    name = str(desc["name"])
    narrator = Narrator(workflow)

    def poll() -> None:
        nonlocal desc
        desc = dict(sfn.describe_execution(executionArn=arn))
        narrator.status = str(desc["status"])
        for event in new_events(sfn, arn, narrator.last_id):
            narrator.take(event)
        if counter is not None and narrator.status == "RUNNING":
            counted = counter(narrator.step, narrator.facts)
            if counted is not None:
                narrator.counted(clock(), f"{counted[0]}/{counted[1]}")

    def ended() -> bool:
        return narrator.status in FINISHED

    if console.is_terminal:
        with Live(view(narrator, name, clock()), console=console, refresh_per_second=4) as live:
            while True:
                poll()
                live.update(view(narrator, name, clock()))
                if ended():
                    break
                time.sleep(poll_seconds)
    else:
        shown = 0
        while True:
            poll()
            if not ended():
                narrator.prewarm_progress(clock())
            for line in narrator.lines[shown:]:
                console.print(
                    Text("  ").append_text(line_text(line, narrator.started)), soft_wrap=True
                )
            shown = len(narrator.lines)
            if ended():
                break
            time.sleep(poll_seconds)
    return Followed(status=narrator.status, description=desc, narrator=narrator)
