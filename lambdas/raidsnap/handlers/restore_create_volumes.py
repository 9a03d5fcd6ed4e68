"""Restore: create every member's volume (once, however often the step is retried)."""

from __future__ import annotations

from typing import Any

from raidsnap.handlers._entry import entry
from raidsnap.workflows import restore


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return restore.create_volumes(restore.CreateCall.model_validate(event)).dump()
