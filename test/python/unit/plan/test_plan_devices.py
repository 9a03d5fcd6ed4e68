"""plan.devices: device names for new attachments, and the md device a restore uses."""

from __future__ import annotations

import pytest

from raidsnap.plan.devices import DEVICE_NAMES, free_device_names, md_device


def test_names_in_use_in_either_spelling_are_skipped() -> None:
    # /dev/xvdf is /dev/sdf to a Xen instance; /dev/hdg and a bare nvme name count as given.
    in_use = ["/dev/xvda", "/dev/xvdf", "/dev/sdg", "/dev/hdh", "nvme0n1"]
    assert free_device_names(in_use, 3) == ["/dev/sdi", "/dev/sdj", "/dev/sdk"]


def test_two_letter_names_follow_the_single_letter_ones() -> None:
    names = free_device_names([], 23)
    assert names[:21] == list(DEVICE_NAMES[:21])
    assert names[21:] == ["/dev/xvdba", "/dev/xvdbb"]


def test_too_few_free_names_is_refused() -> None:
    with pytest.raises(ValueError, match="only 0 free device names, 1 needed"):
        free_device_names(DEVICE_NAMES, 1)


def test_md_device_prefers_the_input_then_the_recorded_device_then_md0() -> None:
    notes: list[str] = []
    assert md_device("/dev/md5", "/dev/md7", notes) == "/dev/md5"
    assert md_device(None, "/dev/md7", notes) == "/dev/md7"
    assert md_device(None, "", notes) == "/dev/md0"
    assert notes == []
    assert md_device(None, "/dev/sda", notes) == "/dev/md0"
    assert notes == ["the set's md device '/dev/sda' is not usable; /dev/md0 used"]
