"""Each run's cost reaches the operators: in its notification, and as the metric RunCostUsd
(dimension Array) the dashboard sums per array. A run publishes only what it cost itself: a
drill's restore publishes its own, so the two add up to the drill's whole cost."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest

from raidsnap_cli import costs
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    backed_up,
    configure_fast_restore,
    create_topics,
    launch_instance,
    make_array,
)

REPO = Path(__file__).resolve().parents[3]


def _emitted(out: str, name: str) -> list[dict[str, Any]]:
    docs = [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]
    return [d for d in docs if name in d]


def _drill(emu: Emulation) -> Any:
    create_topics(emu)
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    host = launch_instance("db1-drill", fx.availability_zone, tag_array=False)
    boto3.client("ec2").create_tags(
        Resources=[host], Tags=[{"Key": "raidsnap:array", "Value": "db1-drill"}]
    )
    run = emu.run("drill", {"array": "db1", "targetInstanceId": host})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    return run


def test_a_drills_notification_says_what_it_cost(emu: Emulation) -> None:
    run = _drill(emu)
    (note,) = [c.params for c in emu.double.calls if (c.service, c.operation) == ("sns", "Publish")]
    assert f"It cost {run.output['cost']['text']}" in note["Message"]


def test_each_run_publishes_its_own_cost_and_they_add_up(
    emu: Emulation, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    run = _drill(emu)
    docs = _emitted(capsys.readouterr().out, "RunCostUsd")
    # the drill's and its restore's (the backup before them publishes none)
    assert len(docs) == 2
    for d in docs:
        assert d["Array"] == "db1"
        assert ["Array", "service"] in d["_aws"]["CloudWatchMetrics"][0]["Dimensions"]
    total = sum(Decimal(str(d["RunCostUsd"][0])) for d in docs)
    assert abs(total - Decimal(run.output["cost"]["usd"])) < Decimal("1e-9")


def test_fsr_a_policy_kept_on_is_a_running_figure_until_a_newer_set_turns_it_off(
    emu: Emulation,
) -> None:
    # GIVEN two backups 4 h apart of an array whose fastRestore policy keeps the newest set
    fx = make_array(emu.hosts, "db1", 3, unrelated=0)
    emu.double.fsr_region_limit = 10
    configure_fast_restore(emu, "db1", [fx.availability_zone], sets=1)
    first = emu.run("backup", {"array": "db1"})
    emu.clock.advance(4 * 3600)
    second = emu.run("backup", {"array": "db1"})
    assert (first.status, second.status) == ("SUCCEEDED", "SUCCEEDED")
    assert second.output["fastRestore"]["retiredSets"] == [first.output["setId"]]
    sfn = boto3.client("stepfunctions")

    # WHEN raidsnap status prices each
    older = costs.usage(sfn, first.arn, now=emu.clock.now())
    newer = costs.usage(sfn, second.arn, now=emu.clock.now())

    # THEN the first backup's pairs count until the second turned them off (over 4 h each),
    # the second's to now, said so
    assert len(older.fsr) == 3
    assert all(p.dsu_hours > 4 for p in older.fsr)
    assert not any("running figure" in n for n in older.notes)
    assert len(newer.fsr) == 3
    assert any("running figure" in n for n in newer.notes)


@pytest.mark.parametrize("fails", [False, True])
def test_an_ended_backup_publishes_what_it_cost_from_its_history(
    emu: Emulation, capsys: pytest.CaptureFixture[str], fails: bool
) -> None:
    # GIVEN a backup that ended (a snapshot in error fails it)
    fx = make_array(emu.hosts, "db1", 3)
    if fails:
        emu.double.fail_snapshots(fx.member_ids[0])
    run = emu.run("backup", {"array": "db1"})
    assert run.status == ("FAILED" if fails else "SUCCEEDED")
    capsys.readouterr()

    # WHEN Step Functions reports its end to EventBridge
    (delivery,) = [
        d for d in emu.services.execution_event(run.arn) if "BackupCost" in d.target
    ] or [None]
    assert delivery is not None and delivery.delivered
    assert delivery.result.error_type is None

    # THEN RunCostUsd for db1 is the run's transitions and its functions' time at list prices,
    # as a hand computation from its history gives them
    (doc,) = _emitted(capsys.readouterr().out, "RunCostUsd")
    assert doc["Array"] == "db1"
    prices = json.loads((REPO / "docs" / "costs" / "prices.json").read_text())["prices"]
    per_transition = Decimal(str(prices["transitions1000"]["usd"])) / 1000
    gb_second = Decimal(str(prices["lambdaGbSecondArm"]["usd"]))
    per_request = Decimal(str(prices["lambdaRequests1M"]["usd"])) / 1_000_000
    entered = sum(1 for e in run.events if e["type"].endswith("StateEntered"))
    seconds = _invocation_seconds(run.events)
    # Lambda bills each invocation's duration rounded up to the millisecond, at 256 MB (1/4 GB).
    billed_ms = sum(math.ceil(Decimal(str(s)) * 1000) for s in seconds)
    expected = (
        entered * per_transition
        + Decimal(billed_ms) / 1000 * Decimal("0.25") * gb_second
        + len(seconds) * per_request
    )
    assert abs(Decimal(str(doc["RunCostUsd"][0])) - expected) < Decimal("1e-9")


def _invocation_seconds(events: list[dict[str, Any]]) -> list[float]:
    """Each function invocation's time in the history: started to its end (a callback Task's
    invocation ends when it is submitted; its answer is no invocation)."""
    started: dict[int, Any] = {}
    out: list[float] = []
    for e in events:
        if e["type"] in ("LambdaFunctionStarted", "TaskStarted"):
            started[int(e["id"])] = e["timestamp"]
        elif e["type"] in ("LambdaFunctionSucceeded", "LambdaFunctionFailed", "TaskSubmitted"):
            began = started.pop(int(e["previousEventId"]), None)
            if began is not None:
                out.append((e["timestamp"] - began).total_seconds())
    return out
