"""Where an array's sets are copied to, as the stack configured it (COPIES_BY_ARRAY, written
at synth from arrays.<name>.copies; lib/constructs/copies.ts)."""

from __future__ import annotations

from dataclasses import dataclass

from raidsnap.environment import json_env
from raidsnap.errors import ConfigurationError


@dataclass(frozen=True)
class CopyDestination:
    """One place an array's sets are copied to (COPIES_BY_ARRAY; lib/copies.ts): its id (the
    Region, or account/Region), the copy workflow there, the retention and key there, and for
    another account the role this stack assumes to start a copy there."""

    id: str
    region: str
    account: str
    retention: int
    state_machine_arn: str
    role_arn: str = ""
    kms_key_arn: str = ""


def copies_by_array() -> dict[str, list[CopyDestination]]:
    """Each configured array's copies (COPIES_BY_ARRAY, a JSON map of array to a list; unset or
    {}: no array is copied anywhere)."""
    mapping = json_env("COPIES_BY_ARRAY", "{}")
    if not isinstance(mapping, dict) or not all(isinstance(v, list) for v in mapping.values()):
        raise ConfigurationError("COPIES_BY_ARRAY must map array names to lists of copies")
    try:
        return {
            str(array): [
                CopyDestination(
                    id=str(c["id"]),
                    region=str(c["region"]),
                    account=str(c["account"]),
                    retention=int(c["retention"]),
                    state_machine_arn=str(c["stateMachineArn"]),
                    role_arn=str(c.get("roleArn", "")),
                    kms_key_arn=str(c.get("kmsKeyArn", "")),
                )
                for c in raw
            ]
            for array, raw in mapping.items()
        }
    except (KeyError, TypeError, ValueError, AttributeError):
        raise ConfigurationError(
            "COPIES_BY_ARRAY entries need id, region, account, retention and stateMachineArn"
        ) from None


def copy_destinations() -> dict[str, list[str]]:
    """Each copied array's destinations, by id (Region, or account/Region)."""
    return {array: [d.id for d in places] for array, places in copies_by_array().items()}
