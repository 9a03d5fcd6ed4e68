"""plan.cleanup: what may be done with a volume a run created, whoever cleans up after it."""

from __future__ import annotations

import pytest

from raidsnap.plan.cleanup import attached_to, disposition
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
