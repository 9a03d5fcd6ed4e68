"""EventBridge target: an event about a failing array becomes one recovery run."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import RecoverySettings
from raidsnap.handlers._entry import entry
from raidsnap.workflows.recovery.contracts import BusEvent
from raidsnap.workflows.recovery.start import start


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return start(BusEvent.model_validate(event), RecoverySettings.from_env()).dump()
