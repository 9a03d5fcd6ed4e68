"""The one Logger, Tracer and Metrics of the package (service name from POWERTOOLS_SERVICE_NAME)."""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger()
tracer = Tracer()
# The namespace is fixed when this module is first imported; the stack sets it, and raidsnap
# is the only sensible value when the environment does not (a local import, a test).
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "raidsnap")


def count(name: str, value: float = 1) -> None:
    """Add ``value`` to the metric ``name`` (unit Count) of this invocation."""
    metrics.add_metric(name=name, unit="Count", value=value)


def for_array(array: str) -> None:
    """The invocation's metrics are the array's (dimension Array)."""
    metrics.add_dimension(name="Array", value=array)
