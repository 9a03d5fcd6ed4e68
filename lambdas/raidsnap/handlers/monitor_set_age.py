"""Every few minutes: publish the age of each array's newest complete set (the RPO metric)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from raidsnap import monitoring
from raidsnap.environment import configured_arrays
from raidsnap.handlers._entry import entry


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return monitoring.publish(datetime.now(UTC), configured_arrays())
