"""Recovery workflow steps (workflows/recovery/steps.py): the run's object in, a result out."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import RecoveryStepSettings
from raidsnap.handlers._entry import entry
from raidsnap.workflows.recovery.contracts import RecoveryState
from raidsnap.workflows.recovery.steps import run


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    state = RecoveryState.model_validate(event["state"])
    return run(str(event["step"]), state, RecoveryStepSettings.from_env()).dump()
