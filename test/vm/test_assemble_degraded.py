"""assemble.sh undoes only what it did itself: an array that was already active under MdDevice
before the document ran (assembled at boot from mdadm.conf, say) is not its own, and a refusal
must leave it running, even when it is degraded."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from vmlib import Commands, blank_disk, boot, new_volume_id

from conftest import record

pytestmark = pytest.mark.vm

UUID = "0badc0de:12345678:9abcdef0:2468ace0"


def test_assemble_refusing_a_degraded_array_it_did_not_assemble_leaves_it_running(
    tmp_path: Path, rng: random.Random
) -> None:
    disks = [blank_disk(tmp_path / f"m{i}.img", 64, new_volume_id(rng)) for i in range(2)]
    cmds = Commands()
    members = " ".join(f"$(by_id {d.serial})" for d in disks)
    assemble = {
        "VolumeIds": ",".join(d.volume_id for d in disks),
        "MdUuid": UUID,
        "MdDevice": "/dev/md0",
        "MountPoint": "/data",
        "ReadOnly": "false",
        "Persist": "false",
    }
    scenario = f"""
set -e
# A RAID 1 the instance already runs as /dev/md0, one mirror half marked faulty: degraded, but
# every block is still served by the other half.
mdadm --create /dev/md0 --run --assume-clean --level=1 --raid-devices=2 --metadata=1.2 \\
  --name=db1 --homehost=srchost --uuid={UUID} {members}
mkfs.ext4 -q -F /dev/md0
mdadm /dev/md0 --fail $(by_id {disks[1].serial})
set +e
{cmds.ssm("assemble", "assemble", **assemble)}
cat /sys/block/md0/md/array_state >/work/state 2>/dev/null || echo gone >/work/state
"""
    b = record("assemble degraded", boot(tmp_path / "vm", scenario, disks, commands=cmds))
    # THEN the document refuses the degraded array
    assert b.rc_of("assemble") == 1, b.explain("assemble")
    assert b.json_of("assemble")["error"] == "AssembleFailed", b.explain("assemble")
    # AND /dev/md0, which it found running and did not assemble, still runs
    assert b.text("state").strip() in ("clean", "active"), b.explain("assemble")
