"""Backup: look at the set's snapshots; fail on the first error, else say how long to wait."""

from __future__ import annotations

from typing import Any

from raidsnap.handlers._entry import entry
from raidsnap.workflows import backup
from raidsnap.workflows.backup.contracts import CheckCall


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return backup.check_snapshots(CheckCall.model_validate(event)).dump()
