"""Restore, replace mode: tag the old members replaced-by, detach them, follow the detach."""

from __future__ import annotations

from typing import Any

from raidsnap.handlers._entry import entry
from raidsnap.workflows import restore


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return restore.detach_old(restore.DetachCall.model_validate(event)).dump()
