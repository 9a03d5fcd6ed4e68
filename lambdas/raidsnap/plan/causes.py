"""Failure causes: which named error, and which sentence, a failed step or nested run reports."""

from __future__ import annotations

import json
from typing import Any

from raidsnap.errors import public_name


def child_failure(error: dict[str, Any]) -> tuple[str, str]:
    """The named error and cause of a failed step. A nested restore that failed reaches us as
    ``States.TaskFailed`` whose cause is the child's DescribeExecution answer (JSON) carrying
    the restore's own error and cause; a failed Lambda step's cause is its error JSON."""
    name, cause = _failure(error)
    # A Fail state may not name a States.* error; say which one it was instead.
    if name.startswith("States."):
        return "RestoreFailed", f"{name}: {cause}"
    return name, cause


def _failure(error: dict[str, Any]) -> tuple[str, str]:
    name = str(error.get("Error", "States.Runtime"))
    raw = str(error.get("Cause", ""))
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        return public_name(name), raw
    if isinstance(parsed, dict):
        lowered = {str(k).lower(): v for k, v in parsed.items()}
        if "errormessage" in lowered:
            kind = str(lowered.get("errortype") or name)
            return public_name(kind), str(lowered["errormessage"])
        status = str(lowered.get("status", ""))
        if status in ("ABORTED", "TIMED_OUT") and not lowered.get("error"):
            child = str(lowered.get("executionarn", ""))
            word = "stopped" if status == "ABORTED" else "timed out"
            return (
                "RestoreAborted" if status == "ABORTED" else "RestoreTimedOut",
                f"the restore {child} was {word} before it finished",
            )
        if lowered.get("error") or lowered.get("cause"):
            child = str(lowered.get("executionarn", ""))
            where = f" (restore {child})" if child else ""
            return public_name(str(lowered.get("error") or name)), str(
                lowered.get("cause") or ""
            ) + where
    return public_name(name), raw
