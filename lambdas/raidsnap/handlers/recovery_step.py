"""Recovery workflow steps: look for evidence that a member is impaired, wait for the target,
start and follow the restore, and at the end name the outcome."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import RecoveryStepSettings
from raidsnap.handlers._entry import entry
from raidsnap.workflows.recovery.steps import run


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return run(str(event["step"]), event["state"], RecoveryStepSettings.from_env())
