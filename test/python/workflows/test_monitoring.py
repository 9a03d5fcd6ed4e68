"""The set-age reporter: what the RPO alarms and the dashboard watch."""

from __future__ import annotations

import json

import pytest

from raidsnap_emulation.events import EVENTS
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import make_array, make_old_set


def _emf(out: str) -> dict[str, float]:
    """Array -> NewestCompleteSetAgeMinutes from the EMF documents the function printed."""
    values = {}
    for line in out.splitlines():
        if '"_aws"' not in line:
            continue
        doc = json.loads(line)
        if "NewestCompleteSetAgeMinutes" in doc:
            assert doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["Array", "service"]]
            raw = doc["NewestCompleteSetAgeMinutes"]
            values[doc["Array"]] = float(raw[0] if isinstance(raw, list) else raw)
    return values


def test_reporter_publishes_the_age_of_each_arrays_newest_complete_set(
    emu: Emulation, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN db1 with a complete set, then (later) an incomplete one; and db2 with only a failed set
    db1 = make_array(emu.hosts, "db1", 3)
    make_old_set(emu.hosts, db1, "db1-complete")
    make_old_set(emu.hosts, db1, "db1-partial", missing_index=2)
    db2 = make_array(emu.hosts, "db2", 2)
    make_old_set(emu.hosts, db2, "db2-failed", failing=True)
    capsys.readouterr()

    # WHEN the schedule invokes the reporter
    invocation = emu.invoke("monitor_set_age", {})

    # THEN db1's age counts from its complete set (the newer partial set does not count), and
    # db2, with no complete set, reports an age that breaches any RPO
    assert invocation.error_type is None, invocation.error_message
    arrays = invocation.result["arrays"]
    assert arrays["db1"]["newestCompleteSet"] == "db1-complete"
    assert arrays["db2"]["newestCompleteSet"] is None
    assert arrays["db2"]["ageMinutes"] >= 10 * 365 * 24 * 60
    metrics = _emf(capsys.readouterr().out)
    assert set(metrics) == {"db1", "db2"}
    assert metrics["db2"] >= 10 * 365 * 24 * 60
    assert metrics["db1"] == arrays["db1"]["ageMinutes"]


def test_a_configured_array_without_any_snapshot_is_reported(emu: Emulation) -> None:
    # The stack passes its configured arrays; one that never had a backup must not go unseen.
    assert emu.router is not None
    reporter = next(f for f in emu.router.functions.values() if "monitor_set_age" in f.handler)
    reporter.environment["CONFIGURED_ARRAYS"] = "never-backed-up"
    invocation = emu.invoke("monitor_set_age", {})
    assert invocation.result["arrays"]["never-backed-up"]["sets"] == 0
    assert invocation.result["arrays"]["never-backed-up"]["newestCompleteSet"] is None


def test_a_failed_run_reaches_the_operators_through_the_topic(emu: Emulation) -> None:
    # GIVEN a backup of an array no instance holds, which fails
    run = emu.run("backup", {"array": "nope"})
    assert (run.status, run.error) == ("FAILED", "ArrayNotFound")
    # WHEN Step Functions reports the status change to EventBridge
    # (BackupCost prices every ended backup too: its delivery is tested with the run's cost)
    deliveries = [d for d in emu.services.execution_event(run.arn) if ":sns:" in d.target]
    # THEN the run-failed rule may publish to the encrypted topic (topic and key policy), and
    # the operators read which run failed, why, and where to look
    (delivery,) = deliveries
    assert delivery.principal == EVENTS
    assert delivery.delivered, delivery.denied
    (note,) = emu.services.notifications
    name = run.arn.rsplit(":", 1)[1]
    assert note.message == f"raidsnap run {name} FAILED: ArrayNotFound: {run.cause} ({run.arn})"
