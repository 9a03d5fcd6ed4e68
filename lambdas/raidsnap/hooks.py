"""Application hooks of a backup: a pre-snapshot command run on the instance before the
snapshot instant (and before the fsfreeze, if any) and a post-snapshot command run once after
it (ssm/scripts/lib/hooks.sh runs them, never through a shell). Per array in the configuration
(HOOKS_BY_ARRAY), overridable per run in the backup input (``hooks``)."""

from __future__ import annotations

import json
import os
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from raidsnap.errors import ConfigurationError, InvalidInputError

# The documents' allowedPattern for PreSnapshot/PostSnapshot (without the empty case): a
# ready-made hook, or an absolute path whose segments do not start with '.', then up to 15
# arguments of letters, digits and . _ = : , @ % + - (no '/', no shell metacharacters).
HOOK_PATTERN = (
    r"^(builtin:(postgresql-checkpoint|postgresql-backup|mysql-lock)"
    r"|(/[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}){1,16}"
    r"( [A-Za-z0-9_=:,@%+-][A-Za-z0-9._=:,@%+-]{0,99}){0,15})$"
)
HookCommand = Annotated[str, StringConstraints(pattern=HOOK_PATTERN, max_length=2000)]

# What a set's raidsnap:consistency says it got: the application's help (its hooks ran around
# the snapshot instant), a filesystem freeze, or neither.
SetConsistency = Literal["crash", "fsfreeze", "application"]


class Hooks(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    preSnapshot: HookCommand | None = None
    postSnapshot: HookCommand | None = None
    # Each hook's own time limit on the instance (the documents' HookSeconds).
    timeoutSeconds: int = Field(default=60, ge=1, le=999)

    @property
    def active(self) -> bool:
        return bool(self.preSnapshot or self.postSnapshot)


def hooks_for(array: str, override: Hooks | None) -> Hooks | None:
    """The run's hooks: the input's, else the configuration's for the array, else none."""
    if override is not None:
        return override if override.active else None
    raw = os.environ.get("HOOKS_BY_ARRAY", "").strip()
    if not raw:
        return None
    try:
        found = json.loads(raw).get(array)
    except (json.JSONDecodeError, AttributeError):
        raise ConfigurationError("HOOKS_BY_ARRAY is not a JSON map") from None
    if found is None:
        return None
    try:
        hooks = Hooks.model_validate(found)
    except ValueError:
        raise InvalidInputError("hooks", f"the configured hooks of {array} are invalid") from None
    return hooks if hooks.active else None


def document_parameters(hooks: Hooks | None, freeze: bool) -> dict[str, str]:
    """The freeze document's hook parameters (thaw takes PostSnapshot and HookSeconds)."""
    if hooks is None:
        return {}
    return {
        "PreSnapshot": hooks.preSnapshot or "",
        "PostSnapshot": hooks.postSnapshot or "",
        "HookSeconds": str(hooks.timeoutSeconds),
        "Freeze": "true" if freeze else "false",
    }
