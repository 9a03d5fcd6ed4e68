"""LOCK_BY_ARRAY, the backup retention function's view of arrays.<name>.lock: an array without
an entry has no policy, and an entry the synth could not have written is refused by name rather
than read as some lock."""

from __future__ import annotations

import json

import pytest

from raidsnap.environment import ConfigurationError
from raidsnap.lock_settings import LockPolicy, lock_policy


def given(monkeypatch: pytest.MonkeyPatch, mapping: object) -> None:
    monkeypatch.setenv("LOCK_BY_ARRAY", json.dumps(mapping))


def test_an_array_without_an_entry_has_no_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    assert lock_policy("db1") is None
    given(monkeypatch, {"logs": {"mode": "governance", "days": 7, "sets": 2}})
    assert lock_policy("db1") is None


def test_an_entry_reads_as_the_policy_it_states(monkeypatch: pytest.MonkeyPatch) -> None:
    given(
        monkeypatch,
        {
            "db1": {"mode": "governance", "days": 7, "sets": 2},
            "db2": {"mode": "compliance", "days": 30, "sets": 1, "coolOffHours": 12},
        },
    )
    assert lock_policy("db1") == LockPolicy("governance", 7, 2, None)
    assert lock_policy("db2") == LockPolicy("compliance", 30, 1, 12)


@pytest.mark.parametrize(
    "entry",
    [
        {"mode": "legal-hold", "days": 7, "sets": 2},
        {"mode": "governance", "days": 0, "sets": 2},
        {"mode": "governance", "days": 7, "sets": "2"},
        {"mode": "governance", "days": True, "sets": 2},
        {"mode": "compliance", "days": 7, "sets": 1, "coolOffHours": 0},
        {"mode": "compliance", "days": 7, "sets": 1, "coolOffHours": True},
        {"days": 7, "sets": 2},
        "governance",
    ],
)
def test_an_entry_the_synth_could_not_write_is_refused(
    monkeypatch: pytest.MonkeyPatch, entry: object
) -> None:
    given(monkeypatch, {"db1": entry})
    with pytest.raises(ConfigurationError, match=r"LOCK_BY_ARRAY\['db1'\] must be"):
        lock_policy("db1")


def test_a_setting_that_is_no_map_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    given(monkeypatch, ["db1"])
    with pytest.raises(ConfigurationError, match="LOCK_BY_ARRAY must map array names"):
        lock_policy("db1")
