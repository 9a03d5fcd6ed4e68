"""Restore failure path: remove what this run created, release its lock, name the error."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import RestoreDocuments, RestoreSettings
from raidsnap.handlers._entry import entry
from raidsnap.workflows import restore


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    settings, documents = RestoreSettings.from_env(), RestoreDocuments.from_env()
    return restore.cleanup(restore.StateCall.model_validate(event), settings, documents).dump()
