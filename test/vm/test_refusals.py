"""Scenario 4: assemble refuses, with a named error and a non-zero exit, and writes nothing to
any member (image hashes on the host before and after the boot)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from vmlib import Commands, boot, copy_disk

from conftest import ArraySet, record

pytestmark = pytest.mark.vm

WRONG_UUID = "0badc0de:0badc0de:0badc0de:0badc0de"


@pytest.mark.parametrize(
    ("case", "error"),
    [
        ("missing_member", "MemberMissing"),
        ("foreign_disk", "UuidMismatch"),
        ("wrong_uuid", "UuidMismatch"),
        ("count_mismatch", "MemberCountMismatch"),
    ],
)
def test_assemble_refuses_and_leaves_members_untouched(
    case: str,
    error: str,
    *,
    raid0_set: ArraySet,
    raid10_set: ArraySet,
    tmp_path: Path,
    rng: random.Random,
) -> None:
    disks = raid0_set.copies(tmp_path / "disks", rng)
    uuid = raid0_set.uuid
    listed = list(disks)
    attached = list(disks)
    if case == "missing_member":
        attached = disks[:2]
    elif case == "foreign_disk":
        # A member of another array (the RAID 10 set) attached under the third volume id.
        attached[2] = copy_disk(
            raid10_set.disks[0], tmp_path / "disks" / "foreign.img", disks[2].volume_id
        )
    elif case == "wrong_uuid":
        uuid = WRONG_UUID
    elif case == "count_mismatch":
        listed = disks[:2]
    before = {d.path: d.sha256() for d in attached}
    vols = ",".join(d.volume_id for d in listed)
    cmds = Commands()
    assemble = cmds.ssm(
        "assemble",
        "assemble",
        {"RAIDSNAP_DEVICE_WAIT_SECONDS": "3"},
        VolumeIds=vols,
        MdUuid=uuid,
        MountPoint="/data",
        ReadOnly="false",
        Persist="true",
    )
    scenario = f"""
{assemble}
cat /proc/mdstat >/work/mdstat
keep /etc/fstab fstab
"""
    b = record(f"refuse {case}", boot(tmp_path / "vm", scenario, attached, commands=cmds))

    assert b.rc_of("assemble") == 1, b.explain("assemble")
    out = b.json_of("assemble")
    assert out["ok"] is False and out["error"] == error, out
    assert out["message"]
    assert "md0" not in b.text("mdstat") and b.text("fstab").strip() == ""
    assert {d.path: d.sha256() for d in attached} == before
