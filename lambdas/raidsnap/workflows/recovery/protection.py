"""The array's attached-EBS alarm follows the array when a recovery moves it (plan.protection
says what is written; this module reads and writes the alarm)."""

from __future__ import annotations

import os

from botocore.exceptions import ClientError

from raidsnap.aws import alarms
from raidsnap.observability import logger
from raidsnap.plan.protection import Protection, alarms_by_array, repointed, watched


def follow(array: str, instance_id: str) -> Protection:
    """Point the array's alarm at the instance that now holds the array (if it watches another).
    Never raises for AWS's answer: the array is restored by now, and a recovery that failed here
    would give the array's tag back to the instance it left."""
    alarm = alarms_by_array(os.environ.get("ALARM_BY_ARRAY", "")).get(array)
    if not alarm or not instance_id:
        return Protection(array, instance_id, None, moved=False)
    previous: str | None = None
    try:
        current = alarms.describe(alarm)
        if not current:
            logger.warning("the array's alarm is gone", extra={"array": array, "alarm": alarm})
            return Protection(array, instance_id, None, moved=False)
        previous = watched(current)
        if previous == instance_id:
            return Protection(array, instance_id, alarm, moved=False, previous=previous)
        alarms.put(alarm, repointed(current, instance_id))
    except ClientError as err:
        logger.exception("the alarm could not follow the array", extra={"alarm": alarm})
        return Protection(
            array,
            instance_id,
            alarm,
            moved=False,
            previous=previous or "the instance it watched",
            problem=str(err),
        )
    logger.info(
        "alarm follows the array",
        extra={"array": array, "alarm": alarm, "from": previous, "to": instance_id},
    )
    return Protection(array, instance_id, alarm, moved=True, previous=previous)
