"""A restore's plan as a person reads it before saying yes: the set and how old it is, where it
goes, what is taken out of service and kept, what is created, how the volumes are initialized
and how long that is predicted to take."""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from raidsnap.plan import restore_time
from raidsnap.workflows.restore.contracts import Initialization, Member

from .plan import RestorePlan
from .views import human_duration, utc

# The notes of an auto choice (restore_time.explain) are shown with the initialization.
_CHOICE_NOTES = ("initialization auto chose", "the others:")


def _volumes(members: list[Member]) -> str:
    """``3 x gp3 100 GiB (3000 IOPS, 125 MiB/s)``, grouped where members differ."""
    shapes = Counter((m.volumeType, m.sizeGib, m.iops, m.throughput) for m in members)
    parts = []
    for (kind, size, iops, throughput), n in shapes.items():
        extra = ", ".join(
            x
            for x in (f"{iops} IOPS" if iops else "", f"{throughput} MiB/s" if throughput else "")
            if x
        )
        parts.append(f"{n} x {kind} {size} GiB" + (f" ({extra})" if extra else ""))
    return " + ".join(parts)


def _initialization(init: Initialization) -> str:
    way = init.used
    if way == "mixed":
        kinds = Counter(init.members)
        way = " + ".join(f"{k} for {n}" for k, n in sorted(kinds.items()))
    if way == "rate" and init.rate:
        way = f"rate at {init.rate} MiB/s"
    if init.requested == "auto":
        text = f"{way}, chosen by auto"
    elif init.requested == init.used:
        text = way
    else:
        text = f"{way} (asked: {init.requested})"
    if init.mountedSeconds is not None:
        text += (
            f": mounted in about {restore_time.duration(init.mountedSeconds)}, full "
            f"performance in about {restore_time.duration(init.fullPerformanceSeconds)}"
        )
    elif init.used == "none":
        text += ": blocks load from the snapshots as they are first read (slow at first)"
    return text


def plan_view(rp: RestorePlan, now: datetime) -> RenderableType:
    p = rp.plan
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", justify="right")
    grid.add_column()

    def row(label: str, value: str | Text, style: str = "") -> None:
        grid.add_row(label, value if isinstance(value, Text) else Text(value, style=style))

    row("set", p.setId, "bold")
    row(
        "",
        f"taken {utc(rp.taken)} ({human_duration(now - rp.taken)} ago) · complete · "
        f"{rp.consistency}-consistent · {len(p.members)} members",
    )
    name = f" ({rp.target_name})" if rp.target_name else ""
    row("target", f"{p.targetInstanceId}{name} in {p.availabilityZone}", "bold")
    if rp.release is not None:
        r = rp.release
        row(
            "release",
            f"the array {r.md_device} mounted at {r.mount_point} (md UUID {r.md_uuid}) is "
            "unmounted and stopped",
            "yellow",
        )
        # The records say which volumes should be the members; the release reads the members
        # off the instance (md's own view), and that is what the run detaches: a member added
        # by hand since the last set is in no record, yet detached.
        detach = ", ".join(r.members) or "none found in raidsnap's records"
        if r.others:
            them = "it" if len(r.others) == 1 else "them"
            detach += f"; also {', '.join(r.others)} if the instance shows {them} in the array"
        row("detach", detach, "yellow")
        row(
            "",
            "as the release finds the members on the instance: detached and KEPT, tagged "
            "raidsnap:replaced-by (nothing is deleted)",
            "yellow",
        )
        if r.others:
            row(
                "others",
                f"{', '.join(r.others)} attached: not in raidsnap's records; detached too if "
                "the instance shows it is a member of the array, else untouched",
            )
    row("create", f"{_volumes(p.members)} in {p.availabilityZone}, from the set's snapshots")
    row("initialize", _initialization(p.initialization))
    # Where auto weighed the ways: the instance and its EBS bandwidth (the run started from
    # this plan is told the way auto chose, so the plan is where that is said).
    for note in p.notes:
        weighed = re.match(rf"{_CHOICE_NOTES[0]} .+? on (.+?): mounted in", note)
        if weighed:
            row("", f"weighed on {weighed.group(1)}", "dim")
    others = [n for n in p.notes if n.startswith(_CHOICE_NOTES[1])]
    for note in others:
        row("", note, "dim")
    mode = "read-only, " if p.readOnly else ""
    row(
        "mount",
        f"{p.mdDevice} at {p.mountPoint} ({mode}a new md UUID of its own; "
        f"{'persisted in mdadm.conf and fstab' if not p.readOnly else 'not persisted'})",
    )
    for note in p.notes:
        if not note.startswith(_CHOICE_NOTES):
            row("note", note)
    title = Text.assemble(
        ("PLAN ", "bold reverse"),
        (f" restore {p.array} · mode {p.mode}", "bold"),
        ("   nothing has changed yet", "dim"),
    )
    return Group(title, grid)
