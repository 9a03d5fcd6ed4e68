"""What one run cost at list prices: its state transitions, its functions' GB-seconds and
requests, the FSR it enabled (per snapshot and zone, enabled to disabled), the volumes it
created and how long they lived, and the snapshot storage it added.

The figures come from the run's history (GetExecutionHistory) and what it made, read after it
ended: a run cannot count its own last transitions, nor time the function still counting.
The prices come from one table, docs/costs/prices.json (its sources and the month they were
checked are in it); a config's ``prices:`` overrides any of them (another Region, a
discount). Billing rules relied on, each from the page the table names for that price:
- Step Functions Standard bills each state transition.
- Lambda bills each request, and duration rounded up to the millisecond, times the memory
  configured (256 MB for every raidsnap function, lib/constructs/functions.ts, on arm64).
  The history's start-to-end span of an invocation includes the service's own hand-off, so
  the duration here is at most a few milliseconds more than the billed one, never less.
- Fast Snapshot Restore bills one DSU-hour per hour per snapshot per Availability Zone while
  enabled, per minute with a one-hour minimum.
- EBS volumes bill per second with a one-minute minimum, at the month's rate over 730 hours.
- Snapshot storage bills per GB-month of data stored: a month of what a run added is shown as
  a monthly figure, not the run's own (it accrues for as long as the snapshots are kept).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from raidsnap.plan import billed_events

TABLE = Path(__file__).resolve().parents[3] / "docs" / "costs" / "prices.json"
LAMBDA_MEMORY_MB = 256
GB_PER_MB = Decimal(1) / Decimal(1024)


@dataclass(frozen=True)
class Prices:
    usd: dict[str, Decimal]
    sources: dict[str, str]
    included: dict[str, int]
    hours_per_month: Decimal
    region: str
    checked: str


def load_prices(
    overrides: Mapping[str, float | int | str] | None = None,
    table: Mapping[str, Any] | None = None,
) -> Prices:
    """The price table (``table``: the one the stack gave a function, RUN_PRICES; else the
    checkout's file), with a config's overrides; an unknown price name is refused."""
    table = table if table is not None else json.loads(TABLE.read_text())
    usd = {k: Decimal(str(p["usd"])) for k, p in table["prices"].items()}
    sources = {
        k: f"{p['source']}{f' ({u})' if (u := p.get('url')) else ''}, {table['checked']}"
        for k, p in table["prices"].items()
    }
    included = {k: int(p["included"]) for k, p in table["prices"].items() if "included" in p}
    for name, value in (overrides or {}).items():
        if name not in usd:
            raise ValueError(f"prices.{name}: no such price (known: {', '.join(sorted(usd))})")
        usd[name] = Decimal(str(value))
        sources[name] = "overridden by the config"
    return Prices(
        usd,
        sources,
        included,
        Decimal(str(table["hoursPerMonth"]["value"])),
        str(table["region"]),
        str(table["checked"]),
    )


@dataclass(frozen=True)
class FsrPair:
    snapshot_id: str
    zone: str
    enabled: datetime
    disabled: datetime

    @property
    def dsu_hours(self) -> Decimal:
        minutes = math.ceil((self.disabled - self.enabled).total_seconds() / 60)
        return Decimal(max(60, minutes)) / 60


@dataclass(frozen=True)
class VolumeLife:
    volume_id: str
    gib: int
    volume_type: str
    iops: int | None
    throughput: int | None
    created: datetime
    deleted: datetime | None

    @property
    def seconds(self) -> int | None:
        if self.deleted is None:
            return None
        return max(60, math.ceil((self.deleted - self.created).total_seconds()))


@dataclass(frozen=True)
class SnapshotAdded:
    snapshot_id: str
    gib: Decimal
    basis: str


@dataclass
class Usage:
    transitions: int = 0
    lambda_seconds: list[float] = field(default_factory=list)
    fsr: list[FsrPair] = field(default_factory=list)
    volumes: list[VolumeLife] = field(default_factory=list)
    snapshots: list[SnapshotAdded] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __add__(self, other: Usage) -> Usage:
        """A run and the runs it started (a drill's or a recovery's restore): all billed."""
        return Usage(
            self.transitions + other.transitions,
            self.lambda_seconds + other.lambda_seconds,
            self.fsr + other.fsr,
            self.volumes + other.volumes,
            self.snapshots + other.snapshots,
            self.notes + other.notes,
        )

    def as_json(self) -> dict[str, Any]:
        """What a parent run (a drill, a recovery) adds to its own usage."""
        return {
            "transitions": self.transitions,
            "lambdaSeconds": self.lambda_seconds,
            "fsr": [
                [f.snapshot_id, f.zone, f.enabled.isoformat(), f.disabled.isoformat()]
                for f in self.fsr
            ],
            "volumes": [
                [
                    v.volume_id,
                    v.gib,
                    v.volume_type,
                    v.iops,
                    v.throughput,
                    v.created.isoformat(),
                    v.deleted.isoformat() if v.deleted else None,
                ]
                for v in self.volumes
            ],
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], deleted: Mapping[str, datetime]) -> Usage:
        """A child run's usage; ``deleted``: when the parent deleted volumes the child made."""
        fsr = [FsrPair(s, z, _when(a), _when(b)) for s, z, a, b in raw.get("fsr", [])]
        volumes = [
            VolumeLife(i, g, t, io, tp, _when(c), _when(d) if d else deleted.get(i))
            for i, g, t, io, tp, c, d in raw.get("volumes", [])
        ]
        seconds = [float(x) for x in raw.get("lambdaSeconds", [])]
        return cls(int(raw.get("transitions", 0)), seconds, fsr, volumes)

    @property
    def gb_seconds(self) -> Decimal:
        billed = (math.ceil(Decimal(str(s)) * 1000) for s in self.lambda_seconds)
        return sum((Decimal(ms) / 1000 for ms in billed), Decimal(0)) * LAMBDA_MEMORY_MB * GB_PER_MB


@dataclass(frozen=True)
class Line:
    item: str
    quantity: str
    usd: Decimal


@dataclass
class RunCost:
    lines: list[Line]
    monthly: list[Line]
    notes: list[str]
    prices: Prices

    @property
    def total(self) -> Decimal:
        return sum((line.usd for line in self.lines), Decimal(0))

    def text(self) -> str:
        parts = [f"{line.item} {line.quantity}" for line in self.lines]
        head = f"{dollars(self.total)} this run ({'; '.join(parts)})"
        tail = [f"{dollars(m.usd)} a month: {m.item} ({m.quantity})" for m in self.monthly]
        return "; ".join([head, *tail, *self.notes])

    def text_lines(self) -> list[str]:
        """The same, a line an item: the total, each item's quantity, each monthly figure."""
        items = [f"{line.item} {line.quantity}" for line in self.lines]
        tail = [f"{dollars(m.usd)} a month: {m.item} ({m.quantity})" for m in self.monthly]
        return [f"{dollars(self.total)} this run", *items, *tail, *self.notes]

    def as_json(self) -> dict[str, Any]:
        def row(line: Line) -> dict[str, str]:
            return {"item": line.item, "quantity": line.quantity, "usd": str(line.usd)}

        return {
            "usd": str(self.total),
            "text": self.text(),
            "lines": [row(x) for x in self.lines],
            "monthly": [row(x) for x in self.monthly],
            "notes": self.notes,
            "prices": {"region": self.prices.region, "checked": self.prices.checked},
        }


def dollars(value: Decimal) -> str:
    """$2.39 or, below a cent, $0.00080 (two significant figures): a run is often cheap."""
    if value >= Decimal("0.01") or value == 0:
        return f"${value.quantize(Decimal('0.01'))}"
    return f"${float(value):.2g}" if float(value) >= 1e-4 else f"${float(value):.1e}"


def volume_month(v: VolumeLife, p: Prices) -> Decimal | None:
    """A month of one volume; None for a type the table has no price for."""
    if v.volume_type != "gp3":
        return None
    iops = max(0, (v.iops or 0) - p.included["gp3IopsMonth"])
    mibps = max(0, (v.throughput or 0) - p.included["gp3ThroughputMonth"])
    u = p.usd
    return v.gib * u["gp3GbMonth"] + iops * u["gp3IopsMonth"] + mibps * u["gp3ThroughputMonth"]


def _volume_lines(usage: Usage, p: Prices, lines: list[Line], monthly: list[Line]) -> list[str]:
    notes: list[str] = []
    lived, kept = Decimal(0), Decimal(0)
    lived_n, kept_n, minutes = 0, 0, set()
    for v in usage.volumes:
        month = volume_month(v, p)
        if month is None:
            notes.append(f"{v.volume_id} is {v.volume_type}: no price for it in the table")
            continue
        if v.seconds is None:
            kept, kept_n = kept + month, kept_n + 1
        else:
            lived += month * v.seconds / (p.hours_per_month * 3600)
            lived_n += 1
            minutes.add(round(v.seconds / 60))
    if lived_n:
        each = f"{minutes.pop()} min each" if len(minutes) == 1 else "for different times"
        lines.append(Line("volumes while they lived", f"{lived_n} volumes, {each}", lived))
    if kept_n:
        monthly.append(Line("volumes created, while kept", f"{kept_n} volumes", kept))
    return notes


def price(usage: Usage, p: Prices) -> RunCost:
    u = p.usd
    lines = [
        Line(
            "state transitions",
            str(usage.transitions),
            usage.transitions * u["transitions1000"] / 1000,
        ),
        Line(
            "Lambda duration",
            f"{usage.gb_seconds.normalize():f} GB-s",
            usage.gb_seconds * u["lambdaGbSecondArm"],
        ),
        Line(
            "Lambda requests",
            str(len(usage.lambda_seconds)),
            len(usage.lambda_seconds) * u["lambdaRequests1M"] / 1_000_000,
        ),
    ]
    if usage.fsr:
        hours = sum((pair.dsu_hours for pair in usage.fsr), Decimal(0))
        pairs = f"{len(usage.fsr)} snapshot-zone pairs, {hours.normalize()} DSU-hours"
        lines.append(Line("FSR DSU-hours", pairs, hours * u["fsrDsuHour"]))
    monthly: list[Line] = []
    notes = list(usage.notes) + _volume_lines(usage, p, lines, monthly)
    if usage.snapshots:
        gib = sum((s.gib for s in usage.snapshots), Decimal(0))
        bases = sorted({s.basis for s in usage.snapshots})
        quantity = f"{len(usage.snapshots)} snapshots, {gib.normalize()} GiB ({', '.join(bases)})"
        monthly.append(
            Line("snapshot storage added (at most)", quantity, gib * u["snapshotGbMonth"])
        )
    return RunCost(lines, monthly, notes, p)


# --------------------------------------------------------------------- from a history


def _details_output(event: Mapping[str, Any]) -> dict[str, Any] | None:
    raw = (event.get("lambdaFunctionSucceededEventDetails") or {}).get("output")
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _when(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


def _fsr_seen(out: dict[str, Any]) -> tuple[list[str], bool]:
    """A restore step's result: the FSR pairs it says are the run's own, and whether it says
    they were disabled (the FSR step's ``disabled``, the volumes step's ``fsrDisabled``, the
    cleanup's list)."""
    fsr = out.get("fsr") if isinstance(out.get("fsr"), dict) else out
    ours = fsr.get("ours") if isinstance(fsr, dict) and "status" in fsr else None
    off = bool(out.get("disabled") is True or out.get("fsrDisabled"))
    return (list(ours) if isinstance(ours, list) else []), off


def first_seen(events: Iterable[Mapping[str, Any]], key: str) -> dict[str, datetime]:
    """When each id first appears in a list under a key containing ``key`` in a step's result
    (``ids``: the volumes a restore created; ``deleted``: those a drill's teardown removed)."""
    seen: dict[str, datetime] = {}

    def walk(value: Any, when: datetime) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if key in k.lower() and isinstance(v, list):
                    for item in v:
                        if isinstance(item, str):
                            seen.setdefault(item, when)
                walk(v, when)
        elif isinstance(value, list):
            for v in value:
                walk(v, when)

    for e in events:
        out = _details_output(e)
        if out is not None:
            walk(out, _when(e["timestamp"]))
    return seen


def usage_of(
    events: Iterable[Mapping[str, Any]], zone: str | None = None, now: datetime | None = None
) -> Usage:
    """Transitions (retries included), Lambda invocations and the FSR this run enabled, from
    its own history. ``now``: read by the run itself, whose current invocation has started but
    not ended."""
    events = list(events)
    usage = Usage(transitions=billed_events.retries_of(events))
    started: dict[int, datetime] = {}
    enabled: dict[str, datetime] = {}
    disabled: datetime | None = None
    end: datetime | None = None
    for e in events:
        kind, when = str(e["type"]), _when(e["timestamp"])
        if kind.endswith("StateEntered"):
            usage.transitions += 1
        elif kind == "LambdaFunctionStarted" or (
            kind == "TaskStarted" and billed_events.lambda_task(e, "taskStartedEventDetails")
        ):
            started[int(e["id"])] = when
        elif billed_events.invocation_ended(kind, e):
            began = started.pop(int(e["previousEventId"]), None)
            if began is not None:
                usage.lambda_seconds.append((when - began).total_seconds())
            out = _details_output(e) or {}
            ours, off = _fsr_seen(out)
            for sid in ours:
                enabled.setdefault(sid, began or when)
            if off and enabled and disabled is None:
                disabled = when
        elif kind.startswith("Execution") and kind != "ExecutionStarted":
            end = when
    if now is not None:
        usage.lambda_seconds += [(now - began).total_seconds() for began in started.values()]
        end = end or now
    if enabled and disabled is None:
        usage.notes.append("FSR not seen disabled in the run's history: counted to its end")
    until = disabled or end
    if until is not None:
        usage.fsr = [FsrPair(s, zone or "?", t, until) for s, t in enabled.items()]
    return usage
