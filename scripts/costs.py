"""The README's cost figures, computed from the prices in docs/costs/prices.json.

`python scripts/costs.py` prints the two tables; `--write` puts them into README.md between the
`<!-- costs:prices -->` and `<!-- costs:example -->` markers. A test checks the README is
current, so no figure there can disagree with the prices it says it is computed from."""

from __future__ import annotations

import json
import re
import sys
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PRICES = ROOT / "docs" / "costs" / "prices.json"
CENT = Decimal("0.01")


def load() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(PRICES.read_text())
    return data


def money(value: Decimal | float) -> str:
    """$1,642.50: dollars to the cent, rounded half up as a bill is."""
    cents = Decimal(str(value)).quantize(CENT, rounding=ROUND_HALF_UP)
    return f"${cents:,.2f}"


def rate(value: Decimal | float) -> str:
    """A unit price as its page states it: $0.005, $0.025, $0.75, $3.00."""
    d = Decimal(str(value))
    places = max(2, -d.normalize().as_tuple().exponent)  # type: ignore[operator]
    return f"${d:,.{places}f}"


def number(value: Decimal | float | int) -> str:
    """1,800 or 2.33: thousands separated, at most two decimals, no trailing zeros."""
    d = Decimal(str(value)).quantize(CENT, rounding=ROUND_HALF_UP).normalize()
    return f"{d:,f}"


def price(data: dict[str, Any], name: str) -> Decimal:
    return Decimal(str(data["prices"][name]["usd"]))


def _row(item: str, arithmetic: str, value: Decimal, when: str = "per month") -> dict[str, Any]:
    return {"item": item, "arithmetic": arithmetic, "usd": value, "when": when}


def _gp3_month(data: dict[str, Any]) -> tuple[Decimal, str]:
    """One month of the example's members as gp3 volumes: storage, IOPS and throughput."""
    e, p = data["example"], data["prices"]
    n, gib = e["members"], e["memberGib"]
    iops = e["iops"] - p["gp3IopsMonth"]["included"]
    mibps = e["throughputMibps"] - p["gp3ThroughputMonth"]["included"]
    storage = n * gib * price(data, "gp3GbMonth")
    provisioned = n * iops * price(data, "gp3IopsMonth")
    throughput = n * mibps * price(data, "gp3ThroughputMonth")
    text = (
        f"{n} x {number(gib)} GiB x {rate(price(data, 'gp3GbMonth'))} = {money(storage)}, "
        f"+ {n} x {number(iops)} IOPS x {rate(price(data, 'gp3IopsMonth'))}"
        f" = {money(provisioned)}, + {n} x {number(mibps)} MiB/s x "
        f"{rate(price(data, 'gp3ThroughputMonth'))} = {money(throughput)}"
    )
    return storage + provisioned + throughput, text


def example(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The worked example's rows: what db1 costs a month, and what an incident adds."""
    e = data["example"]
    hours = Decimal(data["hoursPerMonth"]["value"])
    n = e["members"]
    snap = price(data, "snapshotGbMonth")
    used = n * e["usedGibPerMember"]
    # The changes since the oldest kept set: the intervals between the kept sets.
    window_h = (e["retention"] - 1) * e["backupEveryHours"]
    changed = n * e["changedGibPerMemberPerDay"] * Decimal(window_h) / 24
    runs = hours / e["backupEveryHours"]
    transitions = runs * e["backupTransitions"]
    per_transition = price(data, "transitions1000") / 1000
    gp3, gp3_text = _gp3_month(data)
    drill_volumes = gp3 / hours * e["drillsPerMonth"] * e["drillVolumeHours"]
    drill_transitions = e["drillsPerMonth"] * e["drillTransitions"]
    fsr_minutes = e["fsrEnablingMinutes"] + e["fsrOptimizingMinutesPerTib"] * e["memberGib"] / 1024
    fsr_minutes += 60 / e["fsrCreditsPerHourAt1Tib"]
    fsr_hours = Decimal(str(fsr_minutes)) / 60
    fsr = n * fsr_hours * price(data, "fsrDsuHour")
    kept = n * hours * price(data, "fsrDsuHour")
    return [
        _row(
            "oldest kept set: every used block",
            f"{n} x {number(e['usedGibPerMember'])} GiB = {number(used)} GB x {rate(snap)}",
            used * snap,
        ),
        _row(
            "later sets: blocks changed within the retention window",
            f"{n} x {e['changedGibPerMemberPerDay']} GiB a day x {window_h} h "
            f"({e['retention'] - 1} intervals of {e['backupEveryHours']} h between the "
            f"{e['retention']} kept sets: {number(Decimal(window_h) / 24)} days)"
            f" = {number(changed)} GB x {rate(snap)}",
            changed * snap,
        ),
        _row(
            "backup runs",
            f"{number(hours)} h / {e['backupEveryHours']} h = {number(runs)} runs x "
            f"{e['backupTransitions']} transitions = {number(transitions)} x "
            f"{rate(price(data, 'transitions1000'))} / 1,000",
            transitions * per_transition,
        ),
        _row(
            "weekly drill: its volumes while it runs",
            f"{e['drillsPerMonth']} drills x {e['drillVolumeHours']} h (if each keeps its volumes "
            f"that long) x {money(gp3)} / {number(hours)} h (a month of 3 volumes like db1's: "
            "the replace row)",
            drill_volumes,
        ),
        _row(
            "weekly drill: its runs",
            f"{e['drillsPerMonth']} x {e['drillTransitions']} transitions = "
            f"{drill_transitions} x {rate(price(data, 'transitions1000'))} / 1,000",
            drill_transitions * per_transition,
        ),
        _row("the stack's KMS key", "1 key", price(data, "kmsKeyMonth")),
        _row("the stack's secret", "1 secret", price(data, "secretMonth")),
        _row("the dashboard", "1 dashboard", price(data, "dashboardMonth")),
        _row(
            "alarms",
            f"{e['alarms']} (db1's recovery and RPO alarms, and the stack's {e['alarms'] - 2}) x "
            f"{rate(price(data, 'alarmMonth'))}",
            e["alarms"] * price(data, "alarmMonth"),
        ),
        _row(
            "after a replace: the old members, kept and tagged `replaced-by`",
            gp3_text,
            gp3,
            "per month until you delete them",
        ),
        _row(
            "a restore that enables FSR itself",
            f"{n} snapshots x 1 zone x {number(fsr_minutes)} min / 60 (about "
            f"{e['fsrEnablingMinutes']} min enabling, an assumption, "
            f"{e['fsrOptimizingMinutesPerTib']} min optimizing per TiB, "
            f"{60 // e['fsrCreditsPerHourAt1Tib']} min for the first credit) x "
            f"{rate(price(data, 'fsrDsuHour'))} an hour",
            fsr,
            "per restore",
        ),
        _row(
            "optional: a `fastRestore` policy keeping FSR on the newest set",
            f"1 set x {n} snapshots x 1 zone x {number(hours)} h x "
            f"{rate(price(data, 'fsrDsuHour'))}",
            kept,
        ),
    ]


def fsr_kept_month(data: dict[str, Any]) -> Decimal:
    """FSR kept on for a month: one snapshot in one zone (synth prints the same per policy)."""
    return Decimal(data["hoursPerMonth"]["value"]) * price(data, "fsrDsuHour")


def steady_total(rows: list[dict[str, Any]]) -> Decimal:
    """What db1 costs in a month without an incident: the rows billed per month, but the
    optional policy and what an incident leaves."""
    return sum(
        (
            r["usd"].quantize(CENT, rounding=ROUND_HALF_UP)
            for r in rows
            if r["when"] == "per month" and not r["item"].startswith("optional")
        ),
        Decimal(0),
    )


def render_prices(data: dict[str, Any]) -> str:
    lines = [
        f"List prices in {data['regionName']} ({data['region']}), as checked in "
        f"{data['checked']}; other Regions differ, and prices change.",
        "",
        "| what | price | source |",
        "| --- | --- | --- |",
    ]
    for p in data["prices"].values():
        lines.append(
            f"| {p['what']} | {rate(p['usd'])} {p['unit']} | [{p['source']}]({p['url']}) |"
        )
    h = data["hoursPerMonth"]
    lines.append(f"| {h['what']} | {h['value']} | [{h['source']}]({h['url']}) |")
    return "\n".join(lines)


def render_example(data: dict[str, Any]) -> str:
    rows = example(data)
    lines = ["| item | arithmetic | cost |", "| --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['item']} | {r['arithmetic']} | {money(r['usd'])} {r['when']} |")
    lines.append(
        f"| **db1 in a month without an incident** | the rows billed per month, but the "
        f"optional policy | **{money(steady_total(rows))}** |"
    )
    return "\n".join(lines)


def render_readme(text: str, data: dict[str, Any] | None = None) -> str:
    data = data or load()
    for name, block in (("prices", render_prices(data)), ("example", render_example(data))):
        full = f"<!-- costs:{name} -->\n{block}\n<!-- /costs:{name} -->"
        pattern = re.compile(rf"<!-- costs:{name} -->.*?<!-- /costs:{name} -->", re.S)
        text = pattern.sub(lambda _m, b=full: b, text)
    return text


def main(argv: list[str]) -> int:
    if "--write" in argv:
        README.write_text(render_readme(README.read_text()))
        return 0
    data = load()
    print(render_prices(data))
    print()
    print(render_example(data))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
