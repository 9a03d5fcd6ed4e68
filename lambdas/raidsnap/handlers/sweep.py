"""On a schedule: remove the FSR and volumes that ended restores left behind (sweeper.py)."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import SweeperSettings
from raidsnap.handlers._entry import entry
from raidsnap.observability import metrics
from raidsnap.workflows import sweeper


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    del event
    settings = SweeperSettings.from_env()
    result = sweeper.sweep(settings.lock_table, settings.restore_executions)
    # One number the alarm watches (anything found means a run did not clean up after itself),
    # and what it was made of.
    metrics.add_metric(name="LeftoversFound", unit="Count", value=result.found)
    metrics.add_metric(name="LeftoverFsrDisabled", unit="Count", value=len(result.fsr_disabled))
    metrics.add_metric(name="LeftoverVolumesDeleted", unit="Count", value=len(result.deleted))
    metrics.add_metric(name="LeftoverVolumesAttached", unit="Count", value=len(result.attached))
    return result.as_dict()
