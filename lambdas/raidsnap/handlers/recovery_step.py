"""Recovery workflow steps (workflows/recovery/steps.py): the run's object in, a result out."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import RecoveryStepSettings
from raidsnap.handlers._entry import entry
from raidsnap.workflows.recovery.contracts import StepCall
from raidsnap.workflows.recovery.steps import run


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return run(StepCall.model_validate(event), RecoveryStepSettings.from_env()).dump()
