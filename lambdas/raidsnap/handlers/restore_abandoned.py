"""After a restore stopped by hand or timed out: remove what it left behind, safely."""

from __future__ import annotations

from typing import Any

from raidsnap.environment import RestoreSettings
from raidsnap.handlers._entry import entry
from raidsnap.workflows import abandoned


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    settings = RestoreSettings.from_env()
    return abandoned.clean_up(abandoned.StatusChange.model_validate(event), settings).dump()
