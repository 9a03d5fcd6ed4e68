"""Drill, step 1: validate the request and the drill instance, name the nested restore."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import DrillSettings
from raidsnap.handlers._entry import entry
from raidsnap.workflows import drill


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return drill.prepare(event, DrillSettings.from_env())
