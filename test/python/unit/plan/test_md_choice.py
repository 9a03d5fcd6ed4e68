"""Which md array of a discover report is the array asked for, on an instance with several."""

from __future__ import annotations

from typing import Any

import pytest

from raidsnap.errors import ArrayNotFoundError
from raidsnap.plan.md_choice import choose

DATA = {
    "device": "/dev/md0",
    "name": "host:md0",
    "uuid": "aa11bb22:cc33dd44:ee55ff66:00112233",
    "mountPoint": "/data",
    "members": [{"volumeId": "vol-0a"}],
}
LOGS = {
    "device": "/dev/md1",
    "name": "host:md1",
    "uuid": "0f0f0f0f:1e1e1e1e:2d2d2d2d:3c3c3c3c",
    "mountPoint": "/logs",
    "members": [{"volumeId": "vol-0b"}],
}
ARRAYS: list[dict[str, Any]] = [DATA, LOGS]


def test_the_per_array_tag_names_the_array_by_md_uuid_in_any_spelling() -> None:
    tags = {"raidsnap:array": "db1", "raidsnap:array:logs": "0F0F0F0F-1E1E1E1E-2D2D2D2D-3C3C3C3C"}
    assert choose("logs", "i-1", tags, ARRAYS, set()) is LOGS


def test_the_per_array_tag_names_the_array_by_mount_point() -> None:
    tags = {"raidsnap:array": "db1", "raidsnap:array:logs": "/logs"}
    assert choose("logs", "i-1", tags, ARRAYS, set()) is LOGS


def test_the_marked_array_is_the_one_no_other_tag_claims() -> None:
    tags = {"raidsnap:array": "db1", "raidsnap:array:logs": "/logs"}
    assert choose("db1", "i-1", tags, ARRAYS, set()) is DATA


def test_a_tag_that_names_no_md_array_is_refused_never_guessed() -> None:
    tags = {"raidsnap:array": "db1", "raidsnap:array:logs": "/var/log/gone"}
    with pytest.raises(ArrayNotFoundError, match="no md array there"):
        choose("logs", "i-1", tags, [LOGS], set())


def test_a_per_array_tag_without_the_instance_mark_counts_for_nothing() -> None:
    tags = {"raidsnap:array:logs": "/logs"}
    with pytest.raises(ArrayNotFoundError, match="several md arrays"):
        choose("logs", "i-1", tags, ARRAYS, set())
