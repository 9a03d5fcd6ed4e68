"""Drill: run discovery on the drill instance, then check the copy against the set."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import drill_documents
from raidsnap.handlers._entry import entry
from raidsnap.workflows.drill.contracts import VERIFY_CALL
from raidsnap.workflows.drill.verify import verify_step


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return verify_step(VERIFY_CALL.validate_python(event), drill_documents()[0]).dump()
