"""Restore: one look at all new volumes; disable this run's FSR once they exist."""

from __future__ import annotations

from typing import Any

from raidsnap.handlers._entry import entry
from raidsnap.workflows import restore


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return restore.check_volumes(restore.CheckCall.model_validate(event)).dump()
