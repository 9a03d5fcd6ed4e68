"""Drill: run discovery on the drill instance, then check the copy against the set."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import drill_documents
from raidsnap.handlers._entry import entry
from raidsnap.workflows import drill


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    step = str(event["step"])
    if step == "discover":
        return drill.send_discover(event["state"], drill_documents()[0])
    if step == "check":
        return drill.verify(event["state"])
    raise ValueError(f"unknown drill verify step {step!r}")
