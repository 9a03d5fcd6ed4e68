"""Restore: attach all new volumes in member order, then follow the attachments."""

from __future__ import annotations

from typing import Any

from raidsnap.handlers._entry import entry
from raidsnap.workflows import restore


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return restore.attach_volumes(restore.AttachCall.model_validate(event)).dump()
