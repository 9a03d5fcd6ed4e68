"""Drill teardown: release the copy, then remove exactly the volumes its restore created."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import drill_documents
from raidsnap.handlers._entry import entry
from raidsnap.workflows import drill


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return drill.teardown_step(event, drill_documents()[1])
