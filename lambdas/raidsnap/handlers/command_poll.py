"""Any workflow: one look at a running SSM command."""

from __future__ import annotations

from typing import Any

from raidsnap import backup
from raidsnap.handlers._entry import entry


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return backup.poll_command(event["command"])
