"""A restore ended: tell the workflow still waiting on it, if one does."""

from __future__ import annotations

from typing import Any

from raidsnap.handlers._entry import entry
from raidsnap.models import StatusChange
from raidsnap.workflows.restore.ended import tell_parent


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return tell_parent(StatusChange.model_validate(event)).dump()
