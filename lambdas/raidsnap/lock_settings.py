"""An array's snapshot lock setting, as the stack gives it to the functions (LOCK_BY_ARRAY)."""

from __future__ import annotations

from dataclasses import dataclass

from raidsnap.environment import json_env
from raidsnap.errors import ConfigurationError


@dataclass(frozen=True)
class LockPolicy:
    """An array's lock setting: lock the snapshots of its newest ``sets`` restorable sets in
    ``mode`` for ``days`` days (with a cooling-off period of ``cool_off_hours`` in compliance
    mode, when given)."""

    mode: str
    days: int
    sets: int
    cool_off_hours: int | None = None


def _count(value: object) -> bool:
    """A whole number from 1 (JSON true is no count, though Python takes it for 1)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def lock_policy(array: str) -> LockPolicy | None:
    """The array's lock policy (LOCK_BY_ARRAY, a JSON map of array to {"mode", "days", "sets",
    "coolOffHours"?}; an array without an entry has none)."""
    mapping = json_env("LOCK_BY_ARRAY", "{}")
    if not isinstance(mapping, dict):
        raise ConfigurationError("LOCK_BY_ARRAY must map array names to settings")
    raw = mapping.get(array)
    if raw is None:
        return None
    fields = raw if isinstance(raw, dict) else {}
    cool_off = fields.get("coolOffHours")
    if (
        fields.get("mode") not in ("governance", "compliance")
        or not all(_count(fields.get(k)) for k in ("days", "sets"))
        or not (cool_off is None or _count(cool_off))
    ):
        raise ConfigurationError(
            f'LOCK_BY_ARRAY[{array!r}] must be {{"mode": "governance"|"compliance", '
            '"days": n >= 1, "sets": n >= 1, "coolOffHours"?: n >= 1}'
        )
    return LockPolicy(str(fields["mode"]), int(fields["days"]), int(fields["sets"]), cool_off)
