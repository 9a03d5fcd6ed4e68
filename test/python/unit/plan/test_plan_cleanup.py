"""plan.cleanup: what may be done with a volume a run created, whoever cleans up after it."""

from __future__ import annotations

import pytest

from raidsnap.plan.cleanup import arrays_holding, attached_to, disposition
from raidsnap.plan.volumes import Attachment, VolumeView


def a_volume(state: str, *attachments: tuple[str, str]) -> VolumeView:
    return VolumeView(
        volume_id="vol-1",
        state=state,
        attachments=tuple(Attachment(i, "/dev/sdf", s) for i, s in attachments),
        fast_restored=False,
        tags={},
    )


@pytest.mark.parametrize(
    ("view", "expected"),
    [
        (a_volume("deleting"), "gone"),
        (a_volume("deleted"), "gone"),
        (a_volume("in-use", ("i-1", "attached")), "attached"),
        (a_volume("in-use", ("i-1", "attaching")), "attached"),
        (a_volume("in-use", ("i-1", "busy")), "attached"),
        (a_volume("in-use", ("i-1", "detaching")), "detaching"),
        # one attachment still live outweighs another on its way off
        (a_volume("in-use", ("i-1", "detaching"), ("i-2", "attached")), "attached"),
        (a_volume("creating"), "creating"),
        (a_volume("available"), "deletable"),
        (a_volume("available", ("i-1", "detached")), "deletable"),
        (a_volume("error"), "deletable"),
    ],
)
def test_disposition(view: VolumeView, expected: str) -> None:
    assert disposition(view) == expected


def test_attached_to_one_instance_counts_every_state_but_detached() -> None:
    view = a_volume("in-use", ("i-1", "detaching"), ("i-2", "detached"))
    assert attached_to(view, "i-1")
    assert not attached_to(view, "i-2")
    assert not attached_to(view, "i-3")
    assert view.on("i-2") == Attachment("i-2", "/dev/sdf", "detached")
    assert view.on("i-3") is None


UUID = "0a1b2c3d:4e5f6071:8293a4b5:c6d7e8f9"
OTHER = "11111111:22222222:33333333:44444444"


def an_array(device: str, uuid: str, *members: str, mounted: str = "") -> dict[str, object]:
    return {
        "device": device,
        "uuid": uuid,
        "mountPoint": mounted or None,
        "members": [{"volumeId": m, "slot": i} for i, m in enumerate(members)],
    }


def test_arrays_of_this_sets_volumes_that_are_not_mounted_are_released() -> None:
    arrays = [an_array("/dev/md0", UUID, "vol-1", "vol-2"), an_array("/dev/md1", UUID, "vol-9")]
    assert arrays_holding(arrays, ["vol-1", "vol-2"], {UUID}) == (None, ["/dev/md0"])
    assert arrays_holding([], ["vol-1"], {UUID}) == (None, [])


def test_a_mounted_array_of_them_is_the_users() -> None:
    arrays = [an_array("/dev/md0", UUID, "vol-1", mounted="/data")]
    assert arrays_holding(arrays, ["vol-1"], {UUID}) == (
        "/dev/md0 is assembled and mounted at /data from ['vol-1']: an assembled, mounted "
        "array is the user's",
        [],
    )


def test_members_the_instance_could_not_name_prove_nothing_free() -> None:
    unnamed = an_array("/dev/md0", UUID, "")
    assert arrays_holding([unnamed], ["vol-1"], {UUID})[0] == (
        "/dev/md0 (array " + UUID + ") has members the instance could not name, which may be "
        "this run's volumes"
    )
    mounted = an_array("/dev/md3", OTHER, "", mounted="/srv/x")
    assert "(array " + OTHER + ", mounted at /srv/x)" in str(
        arrays_holding([mounted], ["vol-1"], {UUID})[0]
    )
    # an unnamed member of another array that is not mounted says nothing about ours
    assert arrays_holding([an_array("/dev/md4", OTHER, "")], ["vol-1"], {UUID}) == (None, [])


def test_another_array_holding_them_keeps_them() -> None:
    arrays = [an_array("/dev/md2", OTHER, "vol-1")]
    assert arrays_holding(arrays, ["vol-1"], {UUID}) == (
        f"/dev/md2 (array {OTHER}) holds them",
        [],
    )
