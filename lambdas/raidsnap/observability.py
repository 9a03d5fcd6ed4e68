"""The one Logger, Tracer and Metrics of the package (service name from POWERTOOLS_SERVICE_NAME)."""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger()
tracer = Tracer()
# The namespace is fixed when this module is first imported; the stack sets it, and raidsnap
# is the only sensible value when the environment does not (a local import, a test).
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "raidsnap")
