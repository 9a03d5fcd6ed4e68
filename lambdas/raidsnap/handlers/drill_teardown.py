"""Drill teardown: release the copy on the drill instance, then detach and delete exactly the
volumes the drill's restore created."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import drill_documents
from raidsnap.handlers._entry import entry
from raidsnap.workflows import drill


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    step = str(event["step"])
    if step == "release":
        return drill.send_release(event["state"], drill_documents()[1])
    if step == "volumes":
        return drill.remove_volumes(event["state"])
    raise ValueError(f"unknown drill teardown step {step!r}")
