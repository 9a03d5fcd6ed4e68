"""The rules of which instance a restore or a backup may act on for an array, and where a
restored array may be mounted (plan.targets), without AWS."""

from __future__ import annotations

import pytest

from raidsnap.errors import ArrayInstanceChangedError, ArrayNotFoundError, InvalidInputError
from raidsnap.plan.targets import (
    Candidate,
    Configured,
    Recorded,
    choose_array_instance,
    mount_point_allowed,
    tag_target,
)

HOME = Recorded("i-home", "2026-11-26 10:00 UTC", "set db1-1")
CONFIG = Configured(frozenset({"i-spare"}), "db1-asg", frozenset({"i-drill"}))
ASG = {"aws:autoscaling:groupName": "db1-asg"}


def tagged(value: str | None, **more: str) -> dict[str, str]:
    return ({"raidsnap:array": value} if value else {}) | more


@pytest.mark.parametrize(
    ("target", "tags", "another", "tag_it"),
    [
        ("i-x", tagged("db1"), False, False),  # tagged for the array
        ("i-spare", tagged(None), False, True),  # the configured replacement, untagged
        ("i-home", tagged(None), False, True),  # the recorded instance lost its tag
        ("i-new", tagged(None, **ASG), False, True),  # launched by the array's group
        ("i-x", tagged("db1-copy"), False, False),  # a name made from the array's
        ("i-drill", tagged("drill"), False, False),  # the configured drill instance
    ],
)
def test_targets_a_restore_may_act_on(
    target: str, tags: dict[str, str], another: bool, tag_it: bool
) -> None:
    assert tag_target("db1", target, tags, HOME, CONFIG, another_array=another) is tag_it


@pytest.mark.parametrize(
    ("target", "tags", "another", "says"),
    [
        ("i-x", tagged(None), False, "carries no raidsnap:array tag"),
        ("i-x", tagged("payments"), False, "a name that is not db1's"),
        ("i-x", tagged("db1-prod"), True, "another array's"),
        ("i-spare", tagged("db2"), True, "another array's"),  # config never overrides
        ("i-spare", tagged("db1-standby"), False, "but carries raidsnap:array=db1-standby"),
        ("i-x", tagged("db1-"), False, "a name that is not db1's"),
        ("i-x", tagged("DB1"), False, "a name that is not db1's"),
    ],
)
def test_targets_a_restore_refuses(
    target: str, tags: dict[str, str], another: bool, says: str
) -> None:
    with pytest.raises(InvalidInputError, match=says):
        tag_target("db1", target, tags, HOME, CONFIG, another_array=another)


def test_the_recorded_instance_wins_and_others_are_named() -> None:
    notes: list[str] = []
    found = [Candidate("i-other", {}), Candidate("i-home", {})]
    assert choose_array_instance("db1", found, HOME, Configured(), notes) == "i-home"
    assert "i-other also carries raidsnap:array=db1" in notes[0]


def test_a_tag_alone_never_moves_the_array_but_the_config_may() -> None:
    with pytest.raises(ArrayInstanceChangedError, match="raidsnap move db1 i-new"):
        choose_array_instance("db1", [Candidate("i-new", {})], HOME, Configured(), [])
    notes: list[str] = []
    assert choose_array_instance("db1", [Candidate("i-spare", {})], HOME, CONFIG, notes) == (
        "i-spare"
    )
    assert "moved from i-home to i-spare" in notes[0]
    # the drill instance is never the array's own
    with pytest.raises(ArrayInstanceChangedError):
        choose_array_instance("db1", [Candidate("i-drill", {})], HOME, CONFIG, [])


def test_without_a_record_one_tagged_instance_is_the_arrays_and_several_are_refused() -> None:
    assert choose_array_instance("db1", [Candidate("i-a", {})], None, Configured(), []) == "i-a"
    with pytest.raises(ArrayNotFoundError, match="several running instances"):
        choose_array_instance(
            "db1", [Candidate("i-a", {}), Candidate("i-b", {})], None, Configured(), []
        )


@pytest.mark.parametrize(
    ("path", "recorded", "allowed"),
    [
        ("/data", None, True),
        ("/data/db1", None, True),
        ("/srv/pg/", None, True),
        ("/opt/db1/data", None, True),
        ("/opt/db2", None, False),
        ("/database", None, False),  # a prefix of the name is not a directory under it
        ("/var/lib/cloud/scripts/per-boot", None, False),
        ("/var/lib/postgresql", "/var/lib/postgresql", True),
        ("/data/../etc", None, False),
    ],
)
def test_mount_points_lie_under_the_allowed_places_or_are_the_recorded_one(
    path: str, recorded: str | None, allowed: bool
) -> None:
    places = ["/data", "/mnt", "/srv", "/opt/<array>"]
    assert mount_point_allowed(path, "db1", places, recorded) is allowed
