"""What a person reads: set tables, execution tables, durations, outputs and errors.

Every value that comes from AWS (set ids, causes, paths) is put into ``Text`` or escaped, so
a bracket in a cause is printed, never read as rich markup."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from raidsnap.aws.snapshot_locks import SnapshotLock
from raidsnap.sets import SnapshotSet
from raidsnap.text import input_words

from .inputs import DEFAULT_OF, OPTION_OF
from .queries import ExecutionInfo


def human_duration(delta: timedelta | float) -> str:
    """``3h 12m``: the two largest units, never more; seconds only under an hour."""
    seconds = int(delta.total_seconds() if isinstance(delta, timedelta) else delta)
    seconds = max(seconds, 0)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m {secs}s" if secs else f"{minutes}m"
    return f"{secs}s"


def utc(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


# ---------------------------------------------------------------------- snapshot sets


@dataclass(frozen=True)
class SetRow:
    set_id: str
    taken: datetime
    members: str
    complete: bool
    why: str
    age: str
    latest: bool
    # What snapshot locks hold of the set now ("" when none does).
    lock: str = ""
    # Where the set was copied, one line per place: how it went, and the locks there.
    copies: tuple[str, ...] = ()


def why_incomplete(snapshot_set: SnapshotSet) -> str:
    """The reason a set cannot be restored, in the order an operator should look at them."""
    n = snapshot_set.member_count
    if not snapshot_set.recorded:
        return "not taken by raidsnap (no manifest)"
    if snapshot_set.degraded:
        return "array was degraded when taken"
    if n is None:
        return "member count unknown (tags missing or disagreeing)"
    failed = snapshot_set.failed
    if failed:
        which = ", ".join(
            (f"member {m.index}" if m.index is not None else m.snapshot_id)
            + (f": {m.state_message}" if m.state_message else "")
            for m in failed
        )
        return f"error ({which})"
    present = {m.index for m in snapshot_set.members if m.index is not None}
    missing = sorted(set(range(n)) - present)
    if missing:
        noun = "member" if len(missing) == 1 else "members"
        return f"missing {noun} {', '.join(str(i) for i in missing)}"
    if any(m.index is None for m in snapshot_set.members) or len(snapshot_set.members) != n:
        return "extra or unindexed snapshots"
    if snapshot_set.pending:
        slowest = min(m.progress for m in snapshot_set.members if m.state == "pending")
        return f"pending ({slowest}%)"
    states = sorted({m.state for m in snapshot_set.members if m.state != "completed"})
    return f"snapshots {', '.join(states)}" if states else "incomplete"


NO_MD_UUID = "no md UUID recorded (taken from the volume tags): restore it with mdUuid"


def lock_words(snapshot_set: SnapshotSet, locks: Mapping[str, SnapshotLock]) -> str:
    """``locked (governance, 1/3 snapshots) until ...``: the lock states that hold the set's
    snapshots, how many they hold, and when the last of them ends (the set cannot be deleted
    whole before then); "" when no lock holds any."""
    mine = [locks[m.snapshot_id] for m in snapshot_set.members if m.snapshot_id in locks]
    if not mine:
        return ""
    states = ", ".join(sorted({lock.state for lock in mine}))
    words = f"locked ({states}, {len(mine)}/{len(snapshot_set.members)} snapshots)"
    ends = [lock.expires for lock in mine if lock.expires is not None]
    return f"{words} until {utc(max(ends))}" if ends else words


def set_rows(
    sets: Iterable[SnapshotSet], now: datetime, locks: Mapping[str, SnapshotLock] | None = None
) -> list[SetRow]:
    """Newest first; the newest restorable set is the one ``latest`` restores. ``locks``: the
    snapshot locks that hold any of the sets' snapshots now."""
    ordered = sorted(sets, key=lambda s: (s.start_time, s.set_id), reverse=True)
    latest = next((s.set_id for s in ordered if s.restorable), None)
    rows = []
    for s in ordered:
        n = s.member_count
        present = len({m.index for m in s.members if m.index is not None})
        rows.append(
            SetRow(
                set_id=s.set_id,
                taken=s.start_time,
                members=f"{present}/{n if n is not None else '?'}",
                complete=s.complete,
                why=why_incomplete(s) if not s.complete else "" if s.restorable else NO_MD_UUID,
                age=human_duration(now - s.start_time),
                latest=s.set_id == latest,
                lock=lock_words(s, locks or {}),
            )
        )
    return rows


def sets_table(array: str, rows: list[SetRow]) -> Table:
    table = Table(title=Text(f"array {array}", style="bold"), title_justify="left")
    table.add_column("set")
    table.add_column("taken")
    table.add_column("age", justify="right")
    table.add_column("members", justify="right")
    table.add_column("state")
    for row in rows:
        if row.complete:
            state = Text("complete", style="green")
            if row.why:
                state.append(f" · {row.why}", style="yellow")
            if row.latest:
                state.append(" · latest", style="bold green")
        else:
            state = Text(f"incomplete: {row.why}", style="yellow")
        if row.lock:
            state.append(f" · {row.lock}", style="cyan")
        for line in row.copies:
            state.append(f"\n  copy to {line}", style="cyan")
        table.add_row(Text(row.set_id), utc(row.taken), row.age, row.members, state)
    return table


# ---------------------------------------------------------------------- executions

GIB = 1 << 30


def prewarm_done(result: Mapping[str, Any]) -> str:
    """'prewarm done: 3.0 GiB at 250 MiB/s in 12 s' from the prewarm document's last line."""
    read = float(result.get("bytes") or 0) / GIB
    rate = result.get("mibPerSecond")
    seconds = float(result.get("seconds") or 0)
    at = f" at {float(rate):.0f} MiB/s" if rate is not None else ""
    return f"prewarm done: {read:.1f} GiB{at} in {minutes(seconds)}"


def minutes(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes:02d} min"


def parse_json(raw: str | None) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def readable_cause(cause: str | None) -> str:
    """A cause as a person reads it: a Lambda error payload becomes its message."""
    if not cause:
        return ""
    parsed = parse_json(cause)
    if isinstance(parsed, dict) and "errorMessage" in parsed:
        kind = parsed.get("errorType")
        message = str(parsed["errorMessage"])
        return f"{kind}: {message}" if kind else message
    return cause


def aws_message(error: ClientError | BotoCoreError) -> str:
    if isinstance(error, ClientError):
        info = error.response.get("Error", {})
        return f"AWS error {info.get('Code')}: {info.get('Message')}"
    return f"AWS error: {error}"


def error_view(error: str | None, cause: str | None) -> Text:
    text = Text()
    text.append(error or "failed", style="bold red")
    shown = readable_cause(cause)
    field, sep, rest = shown.partition(": ")
    option = OPTION_OF.get(field, "")
    # A field set only by an option of another name (takeWith: --with) is named with it.
    renamed = option.startswith("--") and option != f"--{field}" and field not in DEFAULT_OF
    if error == "InvalidInput" and sep and renamed:
        shown = f"{field} ({option}): {rest}"
    if shown:
        text.append(": ")
        text.append(shown)
    return text


def _by_index(value: Any) -> list[tuple[str, str]]:
    """Ids by member index, whether the output gives a list or an index -> id object."""
    if isinstance(value, list):
        return [(str(i), str(v)) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return sorted(((str(k), str(v)) for k, v in value.items()), key=lambda kv: _int(kv[0]))
    return []


def _int(value: str) -> int:
    return int(value) if value.isdigit() else 1 << 30


def _fast_restore(report: Mapping[str, Any]) -> str:
    """What the array's fastRestore policy did, in one line: where FSR is kept, what went off,
    and the warning when the new set got none."""
    kept = ", ".join(map(str, report.get("keptSets") or [])) or "no set"
    zones = ", ".join(map(str, report.get("zones") or []))
    line = f"{report.get('status')}: FSR kept on {kept}" + (f" in {zones}" if zones else "")
    retired = report.get("retiredSets") or []
    if retired:
        line += f"; turned off on {', '.join(map(str, retired))}"
    if report.get("warning"):
        line += f"; {report['warning']}"
    return line


def _retention(kept: Any) -> str | None:
    """What retention kept and deleted of an array's sets, in one line (None: not reported)."""
    if not isinstance(kept, Mapping):
        return None
    deleted = kept.get("deletedSets") or []
    return (
        f"keeps {len(kept.get('keptSets') or [])} of at most {kept.get('keep')} sets; "
        f"deleted {len(deleted)}" + (f": {', '.join(map(str, deleted))}" if deleted else "")
    )


def _together(part: Mapping[str, Any]) -> str:
    """An array taken in the same call, in one line: its set, consistency and snapshots."""
    snapshots = [str(s) for s in part.get("snapshotIds") or []]
    return (
        f"set {part.get('setId')}, {part.get('consistency')}, "
        f"{len(snapshots)} snapshots: {', '.join(snapshots)}"
    )


def output_view(
    workflow: str, output: Any, cost: Mapping[str, Any] | None = None
) -> RenderableType:
    """The fields of a run's output an operator acts on, anything unexpected as JSON; then
    ``cost`` (raidsnap_cli.costs.cost_lines), when given, in its row."""
    if not isinstance(output, Mapping):
        shown = Text(json.dumps(output, indent=2, default=str))
        return shown if cost is None else Group(shown, key_values([("cost", cost_text(cost))]))
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim")
    grid.add_column()

    def add(label: str, value: Any) -> None:
        if value not in (None, "", [], {}):
            grid.add_row(label, Text(str(value)))

    add("array", output.get("array"))
    add("set", output.get("setId"))
    if workflow == "backup":
        add("instance", output.get("instanceId"))
        add("consistency", output.get("consistency"))
        add("members from", output.get("discovery"))
        snapshots = _by_index(output.get("snapshotIds"))
        sources = dict(_by_index(output.get("memberVolumeIds")))
        for index, snap in snapshots:
            source = sources.get(index)
            add(f"member {index}", f"{snap}  (from {source})" if source else snap)
        add("retention", _retention(output.get("retention")))
        keep = output.get("fastRestore")
        if isinstance(keep, Mapping):
            add("fast restore", _fast_restore(keep))
        for part in output.get("together") or []:
            if isinstance(part, Mapping):
                add(f"with {part.get('array')}", _together(part))
                add(f"{part.get('array')} retention", _retention(part.get("retention")))
    else:
        target = output.get("targetInstanceId") or output.get("instanceId")
        zone = output.get("availabilityZone")
        add("target", f"{target} in {zone}" if target and zone else target)
        devices = [str(d) for d in output.get("devices") or []]
        for position, (index, volume) in enumerate(_by_index(output.get("volumeIds"))):
            device = devices[position] if position < len(devices) else ""
            add(f"member {index}", f"{volume} at {device}" if device else volume)
        add("md device", output.get("mdDevice"))
        add("md uuid", output.get("mdUuid"))
        add("mount point", output.get("mountPoint"))
        add("mode", output.get("mode"))
        used, asked = (
            output.get("initialization"),
            output.get("requestedInitialization"),
        )
        add(
            "initialization",
            f"{used}, chosen by auto"
            if asked == "auto"
            else f"{used} (asked: {asked})"
            if asked and asked != used
            else used,
        )
        prewarm = output.get("prewarm")
        if isinstance(prewarm, Mapping):
            result = prewarm.get("result")
            add(
                "prewarm",
                prewarm_done(result).removeprefix("prewarm ")
                if prewarm.get("status") == "success" and isinstance(result, Mapping)
                else prewarm.get("status"),
            )
        replaced = output.get("replacedVolumeIds")
        if replaced:
            add(
                "replaced",
                ", ".join(v for _, v in _by_index(replaced)) + " (kept, detached)",
            )
    notes = output.get("notes")
    if isinstance(notes, list):
        for note in notes:
            add("note", note)
    if cost is not None:
        grid.add_row("cost", cost_text(cost))
    return grid


def describe_input(payload: Any) -> Text:
    """An execution input in words: ``db1 (mode replace, set latest)``; not JSON."""
    return Text(input_words(payload))


def execution_row_cells(run: ExecutionInfo, now: datetime) -> list[RenderableType]:
    end = run.stop or now
    duration = human_duration(end - run.start) + ("" if run.stop else " …")
    return [
        Text(run.name),
        run.workflow,
        status_text(run.status),
        utc(run.start),
        duration,
        Text(run.array),
        Text(run.result),
    ]


STATUS_STYLES = {
    "SUCCEEDED": "green",
    "RUNNING": "cyan",
    "FAILED": "red",
    "TIMED_OUT": "magenta",
    "ABORTED": "magenta",
}


def status_text(status: str) -> Text:
    return Text(status, style=STATUS_STYLES.get(status, ""))


def executions_table(rows: list[list[RenderableType]], title: str) -> Table:
    table = Table(title=Text(title, style="bold"), title_justify="left")
    for column in (
        "execution",
        "workflow",
        "status",
        "started",
        "took",
        "array",
        "result",
    ):
        table.add_column(column, justify="right" if column == "took" else "left")
    for row in rows:
        table.add_row(*row)
    return table


def cost_text(cost: Mapping[str, Any]) -> Text:
    """The value of a view's ``cost`` row (raidsnap_cli.costs.cost_lines): a line each."""
    return Text("\n".join(str(line) for line in cost["lines"]))


def key_values(pairs: Iterable[tuple[str, RenderableType]]) -> Group:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim")
    grid.add_column()
    for label, value in pairs:
        grid.add_row(label, value)
    return Group(grid)
