"""Every few minutes: publish the age of each array's newest complete set (the RPO metric)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric

from raidsnap import monitoring
from raidsnap.handlers._entry import entry
from raidsnap.observability import logger

# An array with no complete set at all is reported as this old, so its RPO alarm fires.
NEVER_MINUTES = 10 * 365 * 24 * 60


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    del event
    configured = [a for a in os.environ.get("CONFIGURED_ARRAYS", "").split(",") if a]
    report = {}
    for age in monitoring.ages(datetime.now(UTC), configured):
        minutes = NEVER_MINUTES if age.age_minutes is None else round(age.age_minutes, 1)
        # One EMF document per array: each carries its own Array dimension.
        with single_metric(
            name="NewestCompleteSetAgeMinutes",
            unit=MetricUnit.Count,
            value=minutes,
        ) as metric:
            metric.add_dimension(name="Array", value=age.array)
        report[age.array] = {
            "newestCompleteSet": age.newest_complete.set_id if age.newest_complete else None,
            "ageMinutes": minutes,
            "sets": age.sets,
        }
        if age.newest_complete is None:
            logger.warning("array has no complete snapshot set", extra={"array": age.array})
    return {"arrays": report}
