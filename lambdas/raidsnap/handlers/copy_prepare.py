"""Copy: check the request against the source set and record the copy's intent here."""

from __future__ import annotations

from typing import Any

from raidsnap.handlers._entry import entry
from raidsnap.workflows import copy
from raidsnap.workflows.copy.contracts import CopyPrepareCall


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return copy.prepare(CopyPrepareCall.model_validate(event)).dump()
