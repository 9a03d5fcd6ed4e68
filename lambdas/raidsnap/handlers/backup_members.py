"""Backup: read the discover report (or fall back to volume tags) into the member list."""

from __future__ import annotations

from typing import Any

from raidsnap.handlers._entry import entry
from raidsnap.workflows import backup
from raidsnap.workflows.backup.contracts import MembersCall


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return backup.collect_members(MembersCall.model_validate(event)).dump()
