"""Execution inputs, validated before anything in EC2 is touched."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from raidsnap.errors import InvalidInputError

ArrayName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")]
Consistency = Literal["crash", "fsfreeze"]
M = TypeVar("M", bound=BaseModel)


class BackupInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    array: ArrayName
    consistency: Consistency | None = None
    trigger: Literal["schedule", "manual"] = "manual"


def parse_input(model: type[M], data: Any) -> M:
    """Validate ``data``; the first problem becomes an InvalidInputError naming its field."""
    if not isinstance(data, dict):
        raise InvalidInputError("input", "the execution input must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "input"
        problem = first["msg"]
        if first["type"] == "extra_forbidden":
            problem = "unknown field"
        elif first["type"] == "string_pattern_mismatch":
            problem = f"{first['input']!r} does not match {first['ctx']['pattern']}"
        raise InvalidInputError(field, problem) from None
