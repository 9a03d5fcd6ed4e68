"""What exists, said where a name did not match: the arrays this account has sets of (or an
instance tagged for), and an array's sets, newest first, so that the next command is a copy
away."""

from __future__ import annotations

from datetime import datetime

from raidsnap import clients, tags
from raidsnap.aws import snapshot_sets

from . import queries
from .views import human_duration, set_rows

SHOWN_SETS = 5


def tagged_arrays() -> dict[str, list[str]]:
    """Array name -> the running instances tagged raidsnap:array with it."""
    pages = (
        clients.ec2()
        .get_paginator("describe_instances")
        .paginate(
            Filters=[
                {"Name": "tag-key", "Values": [tags.ARRAY]},
                {"Name": "instance-state-name", "Values": ["running"]},
            ]
        )
    )
    found: dict[str, list[str]] = {}
    for page in pages:
        for reservation in page["Reservations"]:
            for instance in reservation["Instances"]:
                name = tags.as_dict(instance.get("Tags")).get(tags.ARRAY)  # type: ignore[arg-type]
                if name:
                    found.setdefault(name, []).append(instance["InstanceId"])
    return found


def arrays_lines(now: datetime) -> list[str]:
    """One line per array known here: its sets and where it lives."""
    with_sets = set(queries.arrays_with_snapshots())
    tagged = tagged_arrays()
    lines = []
    for name in sorted(with_sets | set(tagged)):
        rows = set_rows(snapshot_sets.list_sets(name), now) if name in with_sets else []
        latest = next((r for r in rows if r.latest), None)
        sets = (
            f"{_sets(len(rows))}, latest {latest.set_id} ({latest.age} old)"
            if latest
            else f"{_sets(len(rows))}, none complete"
            if rows
            else "no sets yet"
        )
        where = f"on {', '.join(tagged[name])}" if name in tagged else "no running instance tagged"
        lines.append(f"{name}: {sets}; {where}")
    return lines


def sets_lines(array: str, now: datetime) -> list[str]:
    """The array's newest sets, one a line, marked as ``raidsnap sets`` marks them."""
    rows = set_rows(snapshot_sets.list_sets(array), now)
    out = []
    for r in rows[:SHOWN_SETS]:
        state = "complete" if r.complete else f"incomplete: {r.why}"
        out.append(
            f"{r.set_id}  {human_duration(now - r.taken)} old  {state}"
            + (" · latest" if r.latest else "")
        )
    if len(rows) > SHOWN_SETS:
        out.append(f"… and {len(rows) - SHOWN_SETS} older: raidsnap sets --array {array}")
    return out


def _sets(count: int) -> str:
    return f"{count} set" if count == 1 else f"{count} sets"
