"""What one run cost: each workflow's figure against a hand computation, the price table it
comes from (docs/costs/prices.json) and its overrides, and what is read from a run's history."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from raidsnap.plan import run_cost as rc

ROOT = Path(__file__).resolve().parents[4]
T0 = datetime(2026, 11, 27, 2, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def usd(cost: rc.RunCost, item: str) -> Decimal:
    return next(line.usd for line in cost.lines if line.item == item)


def test_prices_come_from_the_one_table_with_its_source_and_date() -> None:
    table = json.loads((ROOT / "docs" / "costs" / "prices.json").read_text())
    prices = rc.load_prices()
    assert prices.checked == table["checked"]
    assert prices.region == table["region"]
    assert prices.usd["fsrDsuHour"] == Decimal(str(table["prices"]["fsrDsuHour"]["usd"]))
    assert prices.usd["lambdaGbSecondArm"] == Decimal("0.0000133334")
    assert prices.sources["transitions1000"].startswith("AWS Step Functions pricing")


def test_a_config_overrides_a_price_and_refuses_an_unknown_one() -> None:
    prices = rc.load_prices({"fsrDsuHour": 0.9})
    assert prices.usd["fsrDsuHour"] == Decimal("0.9")
    assert "overridden" in prices.sources["fsrDsuHour"]
    with pytest.raises(ValueError, match=r"fsrDsuHours.*fsrDsuHour"):
        rc.load_prices({"fsrDsuHours": 0.9})


def test_the_lambda_memory_priced_is_the_stacks() -> None:
    functions = (ROOT / "lib" / "constructs" / "functions.ts").read_text()
    assert re.search(rf"memorySize: {rc.LAMBDA_MEMORY_MB},", functions)
    assert "Architecture.ARM_64" in functions


def test_backup_cost_against_a_hand_computation() -> None:
    usage = rc.Usage(
        transitions=31,
        lambda_seconds=[0.5] * 11,
        snapshots=[rc.SnapshotAdded(f"snap-{i}", Decimal(100), "full size") for i in range(3)],
    )
    cost = rc.price(usage, rc.load_prices())
    # 31 x $0.025 / 1,000 = $0.000775
    assert usd(cost, "state transitions") == Decimal("0.000775")
    # 11 x 0.5 s x 0.25 GB = 1.375 GB-s x $0.0000133334 = $0.0000183334250
    assert usd(cost, "Lambda duration") == Decimal("0.000018333425")
    # 11 x $0.20 / 1,000,000
    assert usd(cost, "Lambda requests") == Decimal("0.0000022")
    assert cost.total == Decimal("0.000795533425")
    # 3 x 100 GB x $0.05: a month of the snapshots the run added, for as long as they are kept
    assert [(m.item, m.usd) for m in cost.monthly] == [
        ("snapshot storage added (at most)", Decimal("15.00"))
    ]


def test_restore_cost_against_a_hand_computation() -> None:
    usage = rc.Usage(
        transitions=60,
        lambda_seconds=[1.2] * 20,
        fsr=[
            rc.FsrPair("snap-a", "us-east-1a", at(0), at(20.5 * 60)),
            rc.FsrPair("snap-b", "us-east-1a", at(0), at(20.5 * 60)),
            rc.FsrPair("snap-c", "us-east-1a", at(0), at(70.5 * 60)),
        ],
        volumes=[
            rc.VolumeLife(f"vol-{i}", 500, "gp3", 6000, 250, at(25 * 60), None) for i in range(3)
        ],
    )
    cost = rc.price(usage, rc.load_prices())
    # Two pairs for 20.5 min: the one-hour minimum, 1 DSU-hour each; one for 70.5 min, billed
    # per started minute: 71 / 60 DSU-hours. (2 + 71/60) x $0.75 = $2.3875
    assert usd(cost, "FSR DSU-hours") == Decimal("2.3875")
    assert usd(cost, "state transitions") == Decimal("0.0015")
    # 20 x 1.2 s x 0.25 GB = 6 GB-s x $0.0000133334
    assert usd(cost, "Lambda duration") == Decimal("0.0000800004")
    assert cost.total == Decimal("2.3875") + Decimal("0.0015") + Decimal("0.0000800004") + Decimal(
        "0.000004"
    )
    # The volumes stay: a month of 3 x (500 GB x $0.08 + 3,000 IOPS above 3,000 x $0.005
    # + 125 MiB/s above 125 x $0.04) = 3 x $60 = $180
    assert [(m.item, m.usd) for m in cost.monthly] == [("volumes created, while kept", 180)]


def test_drill_cost_counts_its_restore_and_the_volumes_it_deleted() -> None:
    restore = rc.Usage(
        transitions=40,
        lambda_seconds=[1.0] * 10,
        volumes=[
            rc.VolumeLife(f"vol-{i}", 100, "gp3", 3000, 125, at(0), at(45 * 60)) for i in range(3)
        ],
    )
    drill = rc.Usage(transitions=22, lambda_seconds=[2.0] * 5) + restore
    cost = rc.price(drill, rc.load_prices())
    assert usd(cost, "state transitions") == Decimal("62") * Decimal("0.000025")
    # 3 x 100 GB x $0.08 a month, for 2,700 s of a 730-hour month
    expected = Decimal(3 * 100) * Decimal("0.08") * Decimal(2700) / Decimal(730 * 3600)
    assert usd(cost, "volumes while they lived") == expected
    assert cost.monthly == []
    assert "3 volumes, 45 min each" in cost.text()


def test_recovery_cost_is_its_own_and_its_restores() -> None:
    recovery = rc.Usage(transitions=12, lambda_seconds=[0.3] * 6) + rc.Usage(
        transitions=38, lambda_seconds=[0.2] * 14
    )
    cost = rc.price(recovery, rc.load_prices())
    assert recovery.transitions == 50
    assert usd(cost, "state transitions") == Decimal("0.00125")
    # (6 x 0.3 + 14 x 0.2) s = 4.6 s x 0.25 GB = 1.15 GB-s
    assert usd(cost, "Lambda duration") == Decimal("1.15") * Decimal("0.0000133334")
    assert usd(cost, "Lambda requests") == Decimal(20) * Decimal("0.0000002")


def test_a_volume_lives_at_least_the_minute_ebs_bills() -> None:
    usage = rc.Usage(volumes=[rc.VolumeLife("vol-1", 730, "gp3", 3000, 125, at(0), at(10))])
    cost = rc.price(usage, rc.load_prices())
    assert usd(cost, "volumes while they lived") == Decimal(730) * Decimal("0.08") * 60 / (
        730 * 3600
    )


def _event(kind: str, when: float, eid: int, prev: int, **details: Any) -> dict[str, Any]:
    return {"type": kind, "timestamp": at(when), "id": eid, "previousEventId": prev, **details}


def _lambda(eid: int, start: float, end: float, output: dict[str, Any]) -> list[dict[str, Any]]:
    out = {"output": json.dumps(output)}
    return [
        _event("LambdaFunctionStarted", start, eid, eid - 1),
        _event(
            "LambdaFunctionSucceeded", end, eid + 1, eid, lambdaFunctionSucceededEventDetails=out
        ),
    ]


def test_usage_is_read_from_a_history() -> None:
    entered = {"stateEnteredEventDetails": {"name": "x"}}
    events = [
        _event("TaskStateEntered", 0, 1, 0, **entered),
        *_lambda(
            2, 0, 1.25, {"status": "pending", "ours": ["snap-a", "snap-b"], "disabled": False}
        ),
        _event("WaitStateEntered", 2, 4, 3, **entered),
        _event("TaskStateEntered", 600, 5, 4, **entered),
        *_lambda(6, 600, 600.5, {"status": "ready", "ours": ["snap-a", "snap-b"]}),
        _event("TaskStateEntered", 900, 8, 7, **entered),
        *_lambda(9, 900, 902, {"status": "available", "ids": ["vol-1"], "fsrDisabled": True}),
        _event("SucceedStateEntered", 903, 11, 10, **entered),
        _event("ExecutionSucceeded", 903, 12, 11),
    ]
    usage = rc.usage_of(events, zone="us-east-1a")
    assert usage.transitions == 5
    assert usage.lambda_seconds == [1.25, 0.5, 2.0]
    assert usage.fsr == [
        rc.FsrPair("snap-a", "us-east-1a", at(0), at(902)),
        rc.FsrPair("snap-b", "us-east-1a", at(0), at(902)),
    ]


def test_fsr_never_seen_disabled_is_counted_to_the_runs_end() -> None:
    events = [
        *_lambda(1, 0, 1, {"status": "pending", "ours": ["snap-a"], "disabled": False}),
        _event("ExecutionFailed", 5000, 3, 2),
    ]
    usage = rc.usage_of(events, zone="us-east-1a")
    assert usage.fsr == [rc.FsrPair("snap-a", "us-east-1a", at(0), at(5000))]
    assert any("not seen disabled" in n for n in usage.notes)


def test_each_retry_of_a_task_is_billed_as_a_transition() -> None:
    # AWS Step Functions pricing: "each retry will be charged as an additional state
    # transition". A Task entered once and retried once is two transitions, and two invocations.
    entered = {"stateEnteredEventDetails": {"name": "x"}}
    failed = {"lambdaFunctionFailedEventDetails": {"error": "ThrottledError"}}
    events = [
        _event("TaskStateEntered", 0, 1, 0, **entered),
        _event("LambdaFunctionScheduled", 0, 2, 1),
        _event("LambdaFunctionStarted", 0, 3, 2),
        _event("LambdaFunctionFailed", 0.5, 4, 3, **failed),
        _event("LambdaFunctionScheduled", 30, 5, 4),
        *_lambda(6, 30, 31, {"status": "done"}),
        _event("TaskStateExited", 31, 8, 7),
        _event("TaskStateEntered", 31, 9, 8, **entered),
        _event("LambdaFunctionScheduled", 31, 10, 9),
        *_lambda(11, 31, 32, {"status": "done"}),
        _event("SucceedStateEntered", 32, 13, 12, **entered),
    ]
    usage = rc.usage_of(events)
    assert usage.transitions == 3 + 1
    assert usage.lambda_seconds == [0.5, 1.0, 1.0]


def test_a_callback_tasks_lambda_invocation_is_counted() -> None:
    # lambda:invoke.waitForTaskToken shows TaskScheduled/TaskStarted/TaskSubmitted (resourceType
    # lambda): the function ran from TaskStarted to TaskSubmitted; the token's answer later
    # (TaskSucceeded) is no invocation.
    entered = {"stateEnteredEventDetails": {"name": "x"}}
    lam = {"resourceType": "lambda", "resource": "invoke.waitForTaskToken"}
    events = [
        _event("TaskStateEntered", 0, 1, 0, **entered),
        _event("TaskScheduled", 0, 2, 1, taskScheduledEventDetails=lam),
        _event("TaskStarted", 0.1, 3, 2, taskStartedEventDetails=lam),
        _event("TaskSubmitted", 0.9, 4, 3, taskSubmittedEventDetails=lam),
        _event("TaskSucceeded", 300, 5, 4, taskSucceededEventDetails=lam),
        _event("TaskStateExited", 300, 6, 5),
        _event("SucceedStateEntered", 300, 7, 6, **entered),
    ]
    usage = rc.usage_of(events)
    assert usage.transitions == 2
    assert usage.lambda_seconds == [0.8]
