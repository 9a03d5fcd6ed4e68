"""Drill, step 1: validate the request and the drill instance, name the nested restore."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import DrillSettings
from raidsnap.handlers._entry import entry
from raidsnap.workflows.drill.contracts import PrepareCall
from raidsnap.workflows.drill.prepare import prepare


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return prepare(PrepareCall.model_validate(event), DrillSettings.from_env()).dump()
