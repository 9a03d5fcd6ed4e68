"""Execution inputs as DESIGN.md gives them, checked here by the workflows' own models so a
mistake is a usage error (exit 2) before anything starts, not a failed run.

Each input field maps back to the option that set it, so a message names what was typed."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from raidsnap import models
from raidsnap.errors import InvalidInputError
from raidsnap.models import RestoreMode

# Choices are the workflow input's own (raidsnap.models): a typo is a usage error naming them.
Mode = RestoreMode

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
    "mdDevice": "--md-device",
    "takeWith": "--with",
}

# A refusal of a field the command left to the workflow names what the workflow chose, not an
# option that was never typed.
DEFAULT_OF = {
    "mode": "the default mode attach",
    "setId": "the latest set",
    "targetInstanceId": "the array's own instance",
    "mountPoint": "the mount point the set recorded",
    "mdDevice": "the md device the set recorded",
    "initialization": "the configured initialization",
}


class InputError(Exception):
    def __init__(self, option: str, problem: str) -> None:
        super().__init__(problem)
        self.option = option
        self.problem = problem


# What a value must look like, in words, where the input's own rule is a pattern.
LOOKS_LIKE = {
    "targetInstanceId": (
        "is not an instance id: an instance id is i- followed by 8 to 17 lowercase "
        "hexadecimal digits, as in i-0123456789abcdef0"
    ),
    "array": (
        "is not an array name: 1 to 63 letters, digits, '.', '_' or '-', starting with a "
        "letter or a digit, as the raidsnap:array tag names it"
    ),
    "setId": (
        'is not a set id: "latest", or an id as `raidsnap sets` lists it, such as '
        "db1-20260105T030000Z-1a2b3c4d"
    ),
    "mountPoint": "is not a mount point: an absolute path such as /data or /mnt/db1",
}
LOOKS_LIKE["takeWith"] = LOOKS_LIKE["array"]


def option_and_problem(field: str, message: str) -> tuple[str, str]:
    """The option that set ``field``, and the problem said in the command's terms: options for
    input fields, words for patterns."""
    key = field.split(".", 1)[0]
    problem = message.split(": ", 1)[-1] if message.startswith(field + ": ") else message
    mismatch = re.fullmatch(r"('.*') does not match .*", problem)
    if mismatch and key in LOOKS_LIKE:
        problem = f"{mismatch.group(1)} {LOOKS_LIKE[key]}"
    # '"initialization": "rate"' -> '--initialization rate'; '"auto"' -> 'auto'
    problem = re.sub(
        r'"(\w+)": "([^"]*)"', lambda m: f"{OPTION_OF.get(m[1], m[1])} {m[2]}", problem
    )
    problem = re.sub(r'"(\w+)"', lambda m: OPTION_OF.get(m[1], m[1]), problem)
    return OPTION_OF.get(key, key), problem


def _checked(error: InvalidInputError) -> InputError:
    return InputError(*option_and_problem(error.field, str(error)))


def backup_input(
    array: str, consistency: str | None, take_with: Sequence[str] = ()
) -> dict[str, Any]:
    payload: dict[str, Any] = {"array": array, "trigger": "manual"}
    if consistency is not None:
        payload["consistency"] = consistency
    if take_with:
        payload["takeWith"] = list(take_with)
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
    md_device: str | None = None,
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
        "mdDevice": md_device,
    }
    payload = {k: v for k, v in given.items() if v is not None}
    try:
        models.parse_restore_input(payload)
    except InvalidInputError as err:
        raise _checked(err) from None
    return payload
