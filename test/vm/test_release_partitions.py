"""A member volume holds more than the array: md0 on the first partitions, a filesystem on the
second partition of the same volume mounted at /logs with a writer. Detaching that volume would
take /logs away under its writer (I/O errors). release.sh refuses by name, changing nothing,
as it refuses an array in use."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from vmlib import MIB, Commands, Disk, blank_disk, boot, new_volume_id

from conftest import record

pytestmark = pytest.mark.vm

SECTOR = 512


def partitioned(path: Path, volume_id: str) -> Disk:
    """A 96 MiB disk with an MBR of two Linux partitions: 1-49 MiB and 49-95 MiB."""
    disk = blank_disk(path, 96, volume_id)
    entries = b""
    for start_mib, size_mib in ((1, 48), (49, 46)):
        entries += struct.pack(
            "<B3sB3sII",
            0x00,
            b"\xff\xff\xfe",
            0x83,  # Linux
            b"\xff\xff\xfe",
            start_mib * MIB // SECTOR,
            size_mib * MIB // SECTOR,
        )
    mbr = bytearray(SECTOR)
    mbr[446 : 446 + len(entries)] = entries
    mbr[510:512] = b"\x55\xaa"
    with path.open("r+b") as f:
        f.write(mbr)
    return disk


def test_release_refuses_a_member_volume_whose_other_partition_is_in_use(
    tmp_path: Path, rng: random.Random
) -> None:
    (tmp_path / "disks").mkdir()
    disks = [partitioned(tmp_path / "disks" / f"d{i}.img", new_volume_id(rng)) for i in range(2)]
    p1 = " ".join(f"$(by_id {d.serial})p1" for d in disks)
    cmds = Commands()
    rel = {"MdDevice": "/dev/md0", "MountPoint": "/data"}
    scenario = f"""
set -e
mdadm --create /dev/md0 --run --assume-clean --level=0 --chunk=64 --raid-devices=2 \\
  --metadata=1.2 {p1} >/work/create.log 2>&1
mkfs.ext4 -q -F /dev/md0
mkdir -p /data /logs && mount /dev/md0 /data
logs=$(by_id {disks[0].serial})p2
mkfs.ext4 -q -F "$logs" && mount "$logs" /logs
# The writer runs in its own process group so that stopping it also stops the sleep it may be
# in, whose working directory would otherwise keep /logs busy for the umount below.
setsid bash -c 'cd /logs && while :; do date >>/logs/app.log; sleep 0.2; done' &
writer=$!
set +e
sleep 1
{cmds.ssm("sibling_in_use", "release", **rel)}
findmnt -rn -o SOURCE --mountpoint /data >/work/data.after
findmnt -rn -o SOURCE --mountpoint /logs >/work/logs.after
kill -- -$writer; wait $writer 2>/dev/null
for _ in $(seq 50); do umount /logs 2>/dev/null && break; sleep 0.1; done
{cmds.ssm("free", "release", **rel)}
"""
    b = record("release sibling partition", boot(tmp_path / "vm", scenario, disks, commands=cmds))

    assert b.rc_of("sibling_in_use") == 1, b.explain("sibling_in_use")
    out = b.json_of("sibling_in_use")
    assert (out["ok"], out["error"]) == (False, "MemberDiskInUse"), out
    assert "/logs" in out["message"] and disks[0].volume_id in out["message"], out
    assert "Nothing was changed" in out["message"], out
    # the array and /logs are still mounted: nothing was released
    assert b.text("data.after").strip() == "/dev/md0"
    assert b.text("logs.after").strip().endswith("p2")
    # once /logs is unmounted, the release goes through
    assert b.rc_of("free") == 0, b.explain("free")
    assert b.json_of("free")["ok"] is True


def test_release_refuses_a_member_volume_whose_other_partition_a_process_has_open(
    tmp_path: Path, rng: random.Random
) -> None:
    """Nothing mounted on p2, but a process writes to the raw partition (a database on a raw
    device): detaching the volume would take it away under its writer just the same."""
    (tmp_path / "disks").mkdir()
    disks = [partitioned(tmp_path / "disks" / f"d{i}.img", new_volume_id(rng)) for i in range(2)]
    p1 = " ".join(f"$(by_id {d.serial})p1" for d in disks)
    cmds = Commands()
    rel = {"MdDevice": "/dev/md0", "MountPoint": "/data"}
    scenario = f"""
set -e
mdadm --create /dev/md0 --run --assume-clean --level=0 --chunk=64 --raid-devices=2 \\
  --metadata=1.2 {p1} >/work/create.log 2>&1
mkfs.ext4 -q -F /dev/md0
mkdir -p /data && mount /dev/md0 /data
raw=$(by_id {disks[0].serial})p2
setsid bash -c "exec 3<>$raw; while :; do printf rec >&3; sleep 0.2; done" &
writer=$!
set +e
sleep 1
{cmds.ssm("raw_open", "release", **rel)}
readlink /proc/$writer/fd/3 >/work/writer.fd
findmnt -rn -o SOURCE --mountpoint /data >/work/data.after
kill -- -$writer; wait $writer 2>/dev/null
"""
    b = record(
        "release sibling partition open", boot(tmp_path / "vm", scenario, disks, commands=cmds)
    )

    assert b.rc_of("raw_open") == 1, b.explain("raw_open")
    out = b.json_of("raw_open")
    assert (out["ok"], out["error"]) == (False, "MemberDiskInUse"), out
    assert "p2" in out["message"] and "open in" in out["message"], out
    assert disks[0].volume_id in out["message"] and "Nothing was changed" in out["message"], out
    # The writer still has its partition, and the array is still mounted.
    assert b.text("writer.fd").strip().endswith("p2")
    assert b.text("data.after").strip() == "/dev/md0"
