"""Backup, after retention: keep FSR enabled on the newest sets (the array's fastRestore)."""

from __future__ import annotations

from typing import Any

from raidsnap.handlers._entry import entry
from raidsnap.workflows import backup
from raidsnap.workflows.backup.contracts import KeepFsrCall


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return backup.keep_fsr(KeepFsrCall.model_validate(event)).dump()
