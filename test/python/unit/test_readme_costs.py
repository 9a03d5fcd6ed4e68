"""The README's cost figures are recomputed from the prices they say they come from
(docs/costs/prices.json, each with its source page and Region), and the README fails this test
the moment it disagrees with them."""

from __future__ import annotations

import importlib.util
import json
import re
from decimal import Decimal
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
PRICES = json.loads((ROOT / "docs" / "costs" / "prices.json").read_text())
GENERATED = re.compile(r"<!-- costs:(\w+) -->.*?<!-- /costs:\1 -->", re.S)


def _costs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("costs", ROOT / "scripts" / "costs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _p(name: str) -> Decimal:
    return Decimal(str(PRICES["prices"][name]["usd"]))


def test_every_price_names_its_source_page_and_region() -> None:
    assert PRICES["region"] == "us-east-1"
    for name, price in [*PRICES["prices"].items(), ("hoursPerMonth", PRICES["hoursPerMonth"])]:
        assert price["source"], name
        assert price["url"].startswith("https://"), name


def test_the_readme_tables_are_the_ones_the_prices_give() -> None:
    readme = README.read_text()
    assert _costs().render_readme(readme) == readme, (
        "run: .venv/bin/python scripts/costs.py --write"
    )
    assert sorted(m.group(1) for m in GENERATED.finditer(readme)) == ["example", "prices"]


def test_the_worked_example_recomputed_by_hand() -> None:
    # GIVEN the prices, recompute each row with plain arithmetic (not scripts/costs.py's)
    e, hours = PRICES["example"], Decimal(PRICES["hoursPerMonth"]["value"])
    gp3 = 3 * 1024 * _p("gp3GbMonth") + 3 * 13000 * _p("gp3IopsMonth")
    gp3 += 3 * 875 * _p("gp3ThroughputMonth")
    expected = {
        "oldest kept set: every used block": 3 * 600 * _p("snapshotGbMonth"),
        # 14 sets 4 h apart span 13 intervals: 52 h of changes, not a month
        "later sets: blocks changed within the retention window": 3
        * 20
        * Decimal(52)
        / 24
        * _p("snapshotGbMonth"),
        # a backup is 8 transitions (test_backup measures it on the synthesized workflow)
        "backup runs": hours / 4 * 8 * _p("transitions1000") / 1000,
        "weekly drill: its volumes while it runs": 4 * gp3 / hours,
        "weekly drill: its runs": 4 * 60 * _p("transitions1000") / 1000,
        "the stack's KMS key": _p("kmsKeyMonth"),
        "the stack's secret": _p("secretMonth"),
        "the dashboard": _p("dashboardMonth"),
        "alarms": 6 * _p("alarmMonth"),
        "after a replace: the old members, kept and tagged `replaced-by`": gp3,
        "a restore that enables FSR itself": 3 * Decimal(121) / 60 * _p("fsrDsuHour"),
        "optional: a `fastRestore` policy keeping FSR on the newest set": 3
        * hours
        * _p("fsrDsuHour"),
    }
    assert (e["members"], e["memberGib"], e["retention"], e["backupEveryHours"]) == (3, 1024, 14, 4)
    micro = Decimal("0.000001")
    rows = {r["item"]: r["usd"].quantize(micro) for r in _costs().example(PRICES)}
    assert rows == {item: value.quantize(micro) for item, value in expected.items()}
    # THEN the README shows each, to the cent
    readme = README.read_text()
    money = _costs().money
    for item, value in expected.items():
        assert f"| {item} |" in readme, item
        assert re.search(rf"\| {re.escape(item)} \|[^\n]*\| {re.escape(money(value))} ", readme), (
            item
        )
    assert money(expected["after a replace: the old members, kept and tagged `replaced-by`"]) == (
        "$545.76"
    )


def test_every_other_dollar_figure_in_the_readme_is_a_price_or_a_computed_figure() -> None:
    costs = _costs()
    known = {costs.rate(p["usd"]) for p in PRICES["prices"].values()}
    rows = costs.example(PRICES)
    known |= {costs.money(r["usd"]) for r in rows}
    known |= {costs.money(costs.steady_total(rows)), costs.money(costs.fsr_kept_month(PRICES))}
    outside = GENERATED.sub("", README.read_text())
    figures = set(re.findall(r"\$\d[\d,]*(?:\.\d+)?", outside))
    assert figures, "the README states no figure outside its cost tables"
    assert figures <= known, sorted(figures - known)


def test_the_stack_prices_fsr_as_the_readme_does() -> None:
    # synth prints a fastRestore policy's monthly price (lib/fast-restore.ts)
    source = (ROOT / "lib" / "fast-restore.ts").read_text()
    constants = dict(re.findall(r"export const (\w+) = '?([\w.-]+)'?;", source))
    assert Decimal(constants["FSR_PRICE_PER_HOUR"]) == _p("fsrDsuHour")
    assert int(constants["HOURS_PER_MONTH"]) == PRICES["hoursPerMonth"]["value"]
    assert constants["FSR_PRICE_REGION"] == PRICES["region"]


def test_the_example_config_quotes_the_same_fsr_price() -> None:
    per_month = _costs().money(_costs().fsr_kept_month(PRICES))
    assert per_month == "$547.50"
    assert f"about {per_month}" in (ROOT / "config" / "example.yaml").read_text()
