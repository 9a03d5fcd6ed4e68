"""Every few minutes: the age of each array's newest complete set, here and where it is copied."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from raidsnap import copy_places, environment, monitoring
from raidsnap.handlers._entry import entry


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    arrays, places = environment.configured_arrays(), copy_places.copy_destinations()
    return monitoring.publish(datetime.now(UTC), arrays, places)
