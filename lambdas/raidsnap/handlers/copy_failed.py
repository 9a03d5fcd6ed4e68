"""Copy: delete the copies a failed run made, and name the failure."""

from __future__ import annotations

from typing import Any

from raidsnap.handlers._entry import entry
from raidsnap.workflows import copy
from raidsnap.workflows.copy.contracts import CopyFailureCall


@entry
def handler(event: dict[str, Any]) -> dict[str, Any]:
    return copy.explain_failure(CopyFailureCall.model_validate(event)).dump()
