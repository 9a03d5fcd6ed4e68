"""Execution inputs as DESIGN.md gives them, checked here by the workflows' own models so a
mistake is a usage error (exit 2) before anything starts, not a failed run.

Each input field maps back to the option that set it, so a message names what was typed."""

from __future__ import annotations

from typing import Any

from raidsnap import models
from raidsnap.errors import InvalidInputError

OPTION_OF = {
    "array": "ARRAY",
    "consistency": "--consistency",
    "setId": "--set",
    "targetInstanceId": "--target",
    "initialization": "--initialization",
    "initializationRate": "--rate",
    "volumeType": "--volume-type",
    "iops": "--iops",
    "throughput": "--throughput",
    "mountPoint": "--mount-point",
    "mode": "--mode",
    "readOnly": "--read-only",
}


class InputError(Exception):
    def __init__(self, option: str, problem: str) -> None:
        super().__init__(problem)
        self.option = option
        self.problem = problem


def _checked(error: InvalidInputError) -> InputError:
    field = error.field.split(".", 1)[0]
    problem = str(error).split(": ", 1)[-1]
    return InputError(OPTION_OF.get(field, field), problem)


def backup_input(array: str, consistency: str | None) -> dict[str, Any]:
    payload: dict[str, Any] = {"array": array, "trigger": "manual"}
    if consistency is not None:
        payload["consistency"] = consistency
    try:
        models.parse_input(models.BackupInput, payload)
    except InvalidInputError as err:
        raise _checked(err) from None
    return payload


def restore_input(
    array: str,
    *,
    set_id: str | None = None,
    target: str | None = None,
    initialization: str | None = None,
    rate: int | None = None,
    volume_type: str | None = None,
    iops: int | None = None,
    throughput: int | None = None,
    mount_point: str | None = None,
    mode: str | None = None,
    read_only: bool = False,
) -> dict[str, Any]:
    """Only the fields given: what is left out, the workflow decides (set tags, config)."""
    given: dict[str, Any] = {
        "array": array,
        "setId": set_id,
        "targetInstanceId": target,
        "initialization": initialization,
        "initializationRate": rate,
        "volumeType": volume_type,
        "iops": iops,
        "throughput": throughput,
        "mountPoint": mount_point,
        "mode": mode,
        "readOnly": True if read_only else None,
    }
    payload = {k: v for k, v in given.items() if v is not None}
    try:
        models.parse_restore_input(payload)
    except InvalidInputError as err:
        raise _checked(err) from None
    return payload
