"""Backup: the set's snapshots, looked at by the polling path, by AwaitSnapshots, or by EBS."""

from __future__ import annotations

from typing import Any

from raidsnap.handlers._entry import entry
from raidsnap.workflows.backup.await_snapshots import look


@entry
def handler(event: dict[str, Any]) -> dict[str, object]:
    return look(event)
