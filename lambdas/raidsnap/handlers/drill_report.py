"""Drill, last step: the DrillSucceeded or DrillFailed metric and a notification."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import topic_arn
from raidsnap.handlers._entry import entry
from raidsnap.workflows import drill


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return drill.report(event, topic_arn())
