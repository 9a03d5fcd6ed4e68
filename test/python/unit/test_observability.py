"""A metric that needs an EMF document of its own (its own dimensions) is published exactly as
Powertools' single_metric publishes it in Lambda, and, like the invocation's metrics, not at all
where POWERTOOLS_METRICS_DISABLED is set (single_metric prints whatever that says)."""

from __future__ import annotations

import json

import pytest
from aws_lambda_powertools.metrics import MetricUnit, single_metric

from raidsnap import observability


@pytest.fixture(autouse=True)
def lambda_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # What the stack gives every function (lib/constructs/functions.ts).
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "raidsnap")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "raidsnap")


def documents(printed: str) -> list[dict[str, object]]:
    docs = [json.loads(line) for line in printed.splitlines() if line.startswith('{"_aws"')]
    for doc in docs:
        doc["_aws"].pop("Timestamp")  # type: ignore[union-attr]
    return docs


@pytest.mark.parametrize("dimensions", [{}, {"Array": "db1"}])
def test_a_metric_alone_is_the_document_single_metric_publishes(
    dimensions: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    with single_metric(name="NewestCompleteSetAgeMinutes", unit=MetricUnit.Count, value=42.5) as m:
        for key, value in dimensions.items():
            m.add_dimension(name=key, value=value)
    before = documents(capsys.readouterr().out)
    observability.publish_alone("NewestCompleteSetAgeMinutes", 42.5, dimensions)
    assert documents(capsys.readouterr().out) == before
    assert len(before) == 1


def test_a_metric_alone_is_silent_where_metrics_are_disabled(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    observability.publish_alone("SnapshotsNotDeleted", 0)
    observability.publish_alone("NewestCompleteSetAgeMinutes", 5, {"Array": "db1"})
    assert capsys.readouterr().out == ""


def test_a_metric_alone_leaves_the_invocations_metrics_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The invocation's metrics carry the Array dimension; a metric alone must not take them
    # along, nor leave its own behind for the invocation's flush.
    observability.metrics.clear_metrics()
    observability.for_array("db1")
    observability.count("BackupSucceeded")
    observability.publish_alone("SnapshotsNotDeleted", 0)
    (alone,) = documents(capsys.readouterr().out)
    assert "BackupSucceeded" not in alone and "Array" not in alone
    observability.metrics.flush_metrics()
    (invocation,) = documents(capsys.readouterr().out)
    assert invocation["Array"] == "db1" and "SnapshotsNotDeleted" not in invocation
