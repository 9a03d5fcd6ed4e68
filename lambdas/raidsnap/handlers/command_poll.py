"""Any workflow: one look at a running SSM command."""

from __future__ import annotations

from typing import Any

from raidsnap.aws import commands
from raidsnap.handlers._entry import entry


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return commands.poll(event["command"])
