"""Backup, last step: retention and the output; a degraded array's run then fails."""

from __future__ import annotations

from typing import Any

from raidsnap.handlers._entry import entry
from raidsnap.workflows import backup
from raidsnap.workflows.backup.contracts import RetentionCall


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return backup.finish(RetentionCall.model_validate(event)).dump()
