"""Following one execution to its end: a live view on a terminal, one line per step otherwise.

The history is read newest first (``reverseOrder``), page by page with ``nextToken`` until a
page reaches an event already seen: a poll costs one call however long the run has been going.
(Read oldest first, the last page carries no token to resume from.) Event ids order the events;
a service that ignores ``reverseOrder`` or paging still yields each event once, in order."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .views import human_duration, readable_cause, status_text

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

HISTORY_PAGE = 100
RECENT_STEPS = 6
FINISHED = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")


@dataclass
class Progress:
    """What the view shows, folded from the events seen so far."""

    name: str
    started: datetime
    status: str = "RUNNING"
    current: str = ""
    done: int = 0
    last_event: str = ""
    last_id: int = 0
    steps: list[tuple[datetime, str]] = field(default_factory=list)

    def take(self, event: dict[str, Any]) -> str | None:
        """Fold one event in; returns a line worth printing on its own, if any."""
        self.last_id = max(self.last_id, int(event["id"]))
        kind = str(event["type"])
        line = describe(event)
        if line:
            # Task, Lambda and Wait events do not name their state: the current one does.
            named = "StateEntered" in kind or "StateExited" in kind or kind.startswith("Execution")
            self.last_event = line if named or not self.current else f"{self.current}: {line}"
        if kind.endswith("StateEntered"):
            self.current = str(event["stateEnteredEventDetails"]["name"])
            self.steps.append((event["timestamp"], self.current))
            return f"→ {self.current}"
        if kind.endswith("StateExited"):
            self.done += 1
            return None
        if kind.endswith("Failed") or kind.endswith("TimedOut") or kind == "ExecutionAborted":
            return line
        return None


def describe(event: dict[str, Any]) -> str:
    kind = str(event["type"])
    details = next(
        (v for k, v in event.items() if k.endswith("EventDetails") and isinstance(v, dict)),
        {},
    )
    if kind.endswith("StateEntered"):
        return f"entered {details.get('name', '')}"
    if kind.endswith("StateExited"):
        return f"left {details.get('name', '')}"
    if "error" in details or "cause" in details:
        cause = readable_cause(details.get("cause"))
        short = cause if len(cause) <= 160 else cause[:157] + "..."
        return f"{kind}: {details.get('error', '')}" + (f" ({short})" if short else "")
    return kind


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


def view(progress: Progress, now: datetime) -> RenderableType:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim")
    grid.add_column()
    grid.add_row("execution", Text(progress.name))
    grid.add_row("status", status_text(progress.status))
    grid.add_row("state", Text(progress.current or "starting", style="bold"))
    grid.add_row("states done", str(progress.done))
    grid.add_row("elapsed", human_duration(now - progress.started))
    grid.add_row("last event", Text(progress.last_event))
    recent = progress.steps[-RECENT_STEPS:]
    if recent:
        lines = Text()
        for at, name in recent:
            lines.append(f"+{human_duration(at - progress.started):<7} ", style="dim")
            lines.append(f"{name}\n")
        lines.rstrip()
        grid.add_row("recent states", lines)
    return Group(grid)


@dataclass
class Followed:
    status: str
    description: dict[str, Any]
    progress: Progress


def follow(
    sfn: SFNClient,
    arn: str,
    console: Console,
    poll_seconds: float,
) -> Followed:
    """Poll until the execution ends. A terminal gets a live view; anything else (a pipe, a
    log file, a test) gets one line per state entered and per failure, with the time since
    the start."""
    desc: dict[str, Any] = dict(sfn.describe_execution(executionArn=arn))
    progress = Progress(name=str(desc["name"]), started=desc["startDate"])

    def poll() -> list[str]:
        nonlocal desc
        desc = dict(sfn.describe_execution(executionArn=arn))
        progress.status = str(desc["status"])
        lines = []
        for event in new_events(sfn, arn, progress.last_id):
            line = progress.take(event)
            if line:
                offset = human_duration(event["timestamp"] - progress.started)
                lines.append(f"  +{offset:<7} {line}")
        return lines

    def ended() -> bool:
        return progress.status in FINISHED

    if console.is_terminal:
        with Live(view(progress, datetime.now(UTC)), console=console, refresh_per_second=4) as live:
            while True:
                poll()
                live.update(view(progress, datetime.now(UTC)))
                if ended():
                    break
                time.sleep(poll_seconds)
    else:
        while True:
            for line in poll():
                console.print(Text(line), soft_wrap=True)
            if ended():
                break
            time.sleep(poll_seconds)
    return Followed(status=progress.status, description=desc, progress=progress)
