"""What counts as evidence that a member of an array is impaired (plan.evidence)."""

from __future__ import annotations

from typing import Any

import pytest

from raidsnap.plan.evidence import (
    arrays_of_set,
    md_evidence,
    unchecked_members,
    volume_status_evidence,
)


def status(
    vid: str, overall: str = "ok", io: str = "passed", events: tuple[str, ...] = ()
) -> dict[str, Any]:
    return {
        "VolumeId": vid,
        "VolumeStatus": {"Status": overall, "Details": [{"Name": "io-enabled", "Status": io}]},
        "Events": [{"EventType": e} for e in events],
    }


def test_healthy_volumes_and_warnings_are_no_evidence() -> None:
    assert volume_status_evidence([status("vol-1"), status("vol-2", overall="warning")]) == []
    assert volume_status_evidence([status("vol-3", overall="insufficient-data")]) == []
    assert volume_status_evidence([{"VolumeId": "vol-4"}]) == []


def test_each_impairment_is_named_with_its_volume() -> None:
    found = volume_status_evidence(
        [
            status("vol-1", overall="impaired"),
            status("vol-2", io="failed"),
            status("vol-3", events=("potential-data-inconsistency",)),
            status("vol-4", events=("io-performance:degraded",)),
        ]
    )
    assert found == [
        "member vol-1: EBS status check impaired",
        "member vol-2: I/O disabled (io-enabled failed)",
        "member vol-3: event potential-data-inconsistency",
    ]


def md(
    state: str = "clean", members: tuple[str, ...] = ("vol-1",), raid: int = 1
) -> dict[str, Any]:
    return {
        "device": "/dev/md0",
        "uuid": "u-1",
        "state": state,
        "raidDevices": raid,
        "members": [{"volumeId": v} for v in members],
    }


def test_the_arrays_of_the_set_are_found_by_uuid_or_by_a_checked_member() -> None:
    by_uuid = md(members=("vol-9",))
    by_member = dict(md(members=("vol-2",)), uuid="other")
    foreign = dict(md(members=("vol-7",)), uuid="other")
    report = {"arrays": [by_uuid, by_member, foreign]}
    assert arrays_of_set(report, "u-1", {"vol-2"}) == [by_uuid, by_member]
    assert arrays_of_set(report, None, {"vol-2"}) == [by_member]
    assert arrays_of_set({}, "u-1", set()) == []


@pytest.mark.parametrize("state", ["clean", "active", "active-idle", "read-auto", "readonly"])
def test_a_working_array_with_all_its_members_is_no_evidence(state: str) -> None:
    assert md_evidence(md(state=state, members=("vol-1", "vol-2"), raid=2)) == []


def test_a_broken_or_short_array_is_named() -> None:
    assert md_evidence(md(state="inactive", members=("vol-1",), raid=2)) == [
        "/dev/md0 is inactive",
        "/dev/md0 has 1 of 2 members",
    ]
    assert md_evidence({"device": "/dev/md0", "members": []}) == ["/dev/md0 is in an unknown state"]


def test_members_not_checked_yet_are_the_reported_ones_ec2_was_not_asked_about() -> None:
    array = md(members=("vol-1", "vol-2", "vol-3"))
    array["members"].append({"device": "/dev/nvme9n1"})  # a member discover could not name
    assert unchecked_members(array, {"vol-2"}) == ["vol-1", "vol-3"]
