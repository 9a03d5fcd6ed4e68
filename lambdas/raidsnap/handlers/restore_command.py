"""Restore: start the release, assemble or prewarm document on the target."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import RestoreDocuments
from raidsnap.handlers._entry import entry
from raidsnap.workflows import restore


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    call = restore.CommandCall.model_validate(event)
    return restore.send_command(call, RestoreDocuments.from_env()).dump()
