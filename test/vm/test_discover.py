"""Scenario 6: discover reports what was created (run while the new array was mounted)."""

from __future__ import annotations

import pytest

from conftest import ArraySet

pytestmark = pytest.mark.vm


@pytest.mark.parametrize("which", ["raid0_set", "raid10_set"])
def test_discover_matches_the_created_array(which: str, request: pytest.FixtureRequest) -> None:
    s: ArraySet = request.getfixturevalue(which)
    b = s.created
    assert b.rc_of("discover") == 0, b.explain("discover")
    out = b.json_of("discover")
    assert out["ok"] is True and out["arrayName"] == s.name
    (array,) = out["arrays"]
    assert array["device"] == "/dev/md0"
    assert array["uuid"] == s.uuid
    assert array["name"] == f"srchost:{s.name}" and array["matchesArrayName"] is True
    assert array["level"] == f"raid{s.level}"
    assert array["chunkKib"] == s.chunk_kib
    assert array["metadata"] == "1.2"
    assert array["raidDevices"] == len(s.disks)
    assert array["state"] in ("clean", "active")
    assert [m["slot"] for m in array["members"]] == list(range(len(s.disks)))
    assert [m["volumeId"] for m in array["members"]] == [d.volume_id for d in s.disks]
    assert [m["serial"] for m in array["members"]] == [d.serial for d in s.disks]
    assert all(m["device"].startswith("/dev/nvme") for m in array["members"])
    assert array["filesystem"] == {"type": s.fs_type, "uuid": s.fs_uuid, "label": ""}
    assert array["mountPoint"] == "/data"
