"""Application hooks of a backup: a pre-snapshot command run on the instance before the
snapshot instant (and before the fsfreeze, if any) and a post-snapshot command run once after
it (ssm/scripts/lib/hooks.sh runs them, never through a shell). Per array in the configuration
(HOOKS_BY_ARRAY), where the array's own commands are also named (``commands``); a run's input
(``hooks``) may choose among those names and the ready-made hooks, never give a command: whoever
may start a backup must not thereby choose what runs as root on the instance."""

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
BUILTINS = ("builtin:postgresql-checkpoint", "builtin:postgresql-backup", "builtin:mysql-lock")
# Ready-made hooks that hold the application from pre to post (a session only their own post
# phase ends, ssm/scripts/lib/hooks.sh): a pre hook of these always has itself as post hook.
HOLDING = ("builtin:postgresql-backup", "builtin:mysql-lock")
# Ready-made hooks that hold nothing at the snapshot instant (a CHECKPOINT shortens the recovery
# of a crash-consistent set): a set they precede is what the filesystem got, never application.
HOLDS_NOTHING = ("builtin:postgresql-checkpoint",)
# A configured command's name (lib/hooks-config.ts checks the same at synth).
CommandName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,31}$")]

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


class ConfiguredHooks(Hooks):
    """An array's hooks in the configuration: the ones a backup runs by default, and the
    commands a run may choose by name."""

    commands: dict[CommandName, HookCommand] = Field(default_factory=dict)

    def default(self) -> Hooks | None:
        """The hooks a backup runs when its input names none: none where neither a pre nor a
        post hook is configured (named commands alone run only when a run names them). The
        synth check of takeWith counts an array as hooked by the same rule
        (lib/hooks-config.ts hooksRun)."""
        hooks = Hooks(
            preSnapshot=self.preSnapshot,
            postSnapshot=self.postSnapshot,
            timeoutSeconds=self.timeoutSeconds,
        )
        return hooks if hooks.active else None


class HooksChoice(BaseModel):
    """A run's hooks (the backup input's ``hooks``): names, resolved by :func:`hooks_for`; a
    hook not given does not run, and an empty object runs none."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    preSnapshot: Annotated[str, StringConstraints(max_length=2000)] | None = None
    postSnapshot: Annotated[str, StringConstraints(max_length=2000)] | None = None
    timeoutSeconds: int | None = Field(default=None, ge=1, le=999)


def hooks_for(array: str, choice: HooksChoice | None) -> Hooks | None:
    """The run's hooks: the ones the input names, else the configuration's for the array, else
    none. A name the array's configuration does not give, or a command, is InvalidInput."""
    configured = _configured(array)
    if choice is None:
        default = configured.default() if configured else None
        return _paired(f"arrays.{array}.hooks", default) if default else None
    commands = configured.commands if configured else {}
    hooks = Hooks(
        preSnapshot=_resolve(array, "preSnapshot", choice.preSnapshot, commands),
        postSnapshot=_resolve(array, "postSnapshot", choice.postSnapshot, commands),
        timeoutSeconds=choice.timeoutSeconds
        or (configured.timeoutSeconds if configured else Hooks().timeoutSeconds),
    )
    if not hooks.active:
        return None
    _with_configured_pair(array, hooks, configured)
    return _paired("hooks", hooks)


def _with_configured_pair(array: str, hooks: Hooks, configured: ConfiguredHooks | None) -> None:
    """The configuration's preSnapshot and postSnapshot, both given, are a pair: a run whose
    pre hook is the configured pre hook has the configured post hook too, so that whoever may
    start a backup cannot pause the application without its resume."""
    if configured is None or not (configured.preSnapshot and configured.postSnapshot):
        return
    if configured.preSnapshot in HOLDING or hooks.preSnapshot != configured.preSnapshot:
        return  # a holding ready-made hook is paired with itself by _paired
    if hooks.postSnapshot != configured.postSnapshot:
        raise InvalidInputError(
            "hooks.postSnapshot",
            f"must name the configured post hook of {array} ({configured.postSnapshot}) when "
            f"preSnapshot names its configured pre hook: arrays.{array}.hooks pairs them, and a "
            "run takes both or neither",
        )


def holds_application(hooks: Hooks | None) -> bool:
    """Whether the pre hook holds the application at the snapshot instant."""
    return bool(hooks and hooks.preSnapshot and hooks.preSnapshot not in HOLDS_NOTHING)


def _paired(field: str, hooks: Hooks) -> Hooks:
    """A holding ready-made pre hook with its own post phase (given or not); another post hook
    would leave the application held, so it is refused, as is a post hook without a pre hook."""
    pre, post = hooks.preSnapshot, hooks.postSnapshot
    if pre is None:
        # The post hook runs once a pre hook started (ssm/scripts/freeze.sh owes it then); a
        # post hook alone would be accepted and never run.
        raise InvalidInputError(
            f"{field}.postSnapshot",
            "is given without a preSnapshot: a post hook runs only after a pre hook started",
        )
    if pre not in HOLDING:
        return hooks
    if post is None:
        return hooks.model_copy(update={"postSnapshot": pre})
    if post != pre:
        raise InvalidInputError(
            f"{field}.postSnapshot",
            f"must be {pre} (or not given) when preSnapshot is {pre}: only its own post phase "
            "lets go of what it holds",
        )
    return hooks


def _resolve(array: str, field: str, name: str | None, commands: dict[str, str]) -> str | None:
    if name is None or name in BUILTINS:
        return name
    if name in commands:
        return commands[name]
    shown = name if len(name) <= 60 else name[:57] + "..."
    named = f" ({', '.join(sorted(commands))})" if commands else " (it names none)"
    raise InvalidInputError(
        f"hooks.{field}",
        f"{shown!r} is not a hook a run may choose: name a ready-made hook "
        f"({', '.join(BUILTINS)}) or a command under arrays.{array}.hooks.commands{named} in "
        "the configuration; a run names hooks, only the configuration gives commands",
    )


def _configured(array: str) -> ConfiguredHooks | None:
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
        return ConfiguredHooks.model_validate(found)
    except ValueError:
        raise InvalidInputError("hooks", f"the configured hooks of {array} are invalid") from None


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
