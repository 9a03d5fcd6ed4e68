"""Copy: record the copied set complete here, then the retention of copies here."""

from __future__ import annotations

from typing import Any

from raidsnap.handlers._entry import entry
from raidsnap.workflows import copy
from raidsnap.workflows.copy.contracts import CopyCall


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return copy.finish(CopyCall.model_validate(event)).dump()
