"""Drill: run discovery on the drill instance, then check the copy against the set."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import drill_documents
from raidsnap.handlers._entry import entry
from raidsnap.workflows import drill


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return drill.verify_step(event, drill_documents()[0])
