"""Every few minutes: the age of each array's newest complete set, here and where it is copied."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from raidsnap import copy_places, monitoring
from raidsnap.environment import configured_arrays
from raidsnap.handlers._entry import entry


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return monitoring.publish(datetime.now(UTC), configured_arrays(), copy_places.copy_destinations())
