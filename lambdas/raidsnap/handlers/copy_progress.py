"""Copy: start what the Region has room for, and look at every copy."""

from __future__ import annotations

from typing import Any

from raidsnap.handlers._entry import entry
from raidsnap.workflows import copy
from raidsnap.workflows.copy.contracts import CopyCall


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return copy.copy_step(CopyCall.model_validate(event)).dump()
