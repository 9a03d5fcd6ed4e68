"""Drill teardown: release the copy, then remove exactly the volumes its restore created."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import drill_documents
from raidsnap.handlers._entry import entry
from raidsnap.workflows.drill.contracts import TEARDOWN_CALL
from raidsnap.workflows.drill.teardown import teardown_step


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return teardown_step(TEARDOWN_CALL.validate_python(event), drill_documents()[1]).dump()
