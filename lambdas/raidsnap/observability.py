"""The one Logger, Tracer and Metrics of the package (service name from POWERTOOLS_SERVICE_NAME)."""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

logger = Logger()
tracer = Tracer()
# The namespace is fixed when this module is first imported; the stack sets it, and raidsnap
# is the only sensible value when the environment does not (a local import, a test).
NAMESPACE = os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "raidsnap"
metrics = Metrics(namespace=NAMESPACE)


def count(name: str, value: float = 1) -> None:
    """Add ``value`` to the metric ``name`` (unit Count) of this invocation."""
    metrics.add_metric(name=name, unit="Count", value=value)


def for_array(array: str) -> None:
    """The invocation's metrics are the array's (dimension Array)."""
    metrics.add_dimension(name="Array", value=array)


def publish_alone(
    name: str,
    value: float,
    dimensions: dict[str, str] | None = None,
    unit: MetricUnit = MetricUnit.Count,
) -> None:
    """Publish the metric ``name`` (unit Count unless said) now, in an EMF document of its own
    with only ``dimensions`` (and the service), apart from the invocation's metrics: one alarm
    for every array, or one document per array. The document is the one Powertools' single_metric
    prints, but it goes through the provider's flush, which honours POWERTOOLS_METRICS_DISABLED
    as the invocation's metrics do (single_metric prints whatever that says)."""
    # EphemeralMetrics keeps its own metrics and dimensions: nothing is shared with ``metrics``.
    alone = EphemeralMetrics(namespace=NAMESPACE)
    alone.add_metric(name=name, unit=unit, value=value)
    for key, dimension in (dimensions or {}).items():
        alone.add_dimension(name=key, value=dimension)
    alone.flush_metrics()
