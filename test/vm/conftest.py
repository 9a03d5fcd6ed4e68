"""Fixtures for the VM suite: the kernel/initramfs, and arrays built once per session whose
disk images the tests copy ("snapshot") and restore under new volume ids."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from vmlib import Boot, Commands, Disk, blank_disk, boot, copy_disk, ensure_vm, new_volume_id

TIMINGS: list[tuple[str, float]] = []


def record(name: str, b: Boot) -> Boot:
    TIMINGS.append((name, b.seconds))
    return b


def pytest_terminal_summary(terminalreporter):  # type: ignore[no-untyped-def]
    if not TIMINGS:
        return
    terminalreporter.section("VM boots (wall seconds per boot)")
    for name, secs in TIMINGS:
        terminalreporter.write_line(f"{secs:7.1f}s  {name}")
    terminalreporter.write_line(
        f"{sum(s for _, s in TIMINGS):7.1f}s  total in {len(TIMINGS)} boots"
    )


@pytest.fixture(scope="session", autouse=True)
def vm_image() -> None:
    started = time.monotonic()
    ensure_vm()
    TIMINGS.append(("ensure.sh", time.monotonic() - started))


@pytest.fixture()
def rng(request: pytest.FixtureRequest) -> random.Random:
    return random.Random(request.node.name)


@dataclass
class ArraySet:
    """A stopped array's member images in slot order, and what was true when it was made."""

    level: str
    chunk_kib: int
    fs_type: str
    name: str
    disks: list[Disk]
    uuid: str
    fs_uuid: str
    sums: str
    created: Boot

    def copies(self, dest: Path, rng: random.Random) -> list[Disk]:
        dest.mkdir(parents=True, exist_ok=True)
        return [
            copy_disk(d, dest / f"copy{i}.img", new_volume_id(rng))
            for i, d in enumerate(self.disks)
        ]


def create_array(
    work: Path,
    *,
    level: str,
    n: int,
    size_mib: int,
    chunk_kib: int,
    fs_type: str,
    name: str,
    seed: str,
) -> ArraySet:
    rng = random.Random(seed)
    disks = [blank_disk(work / f"src{i}.img", size_mib, new_volume_id(rng)) for i in range(n)]
    members = " ".join(f"$(by_id {d.serial})" for d in disks)
    mkfs = "mkfs.xfs -q -f" if fs_type == "xfs" else "mkfs.ext4 -q -F"
    cmds = Commands()
    scenario = f"""
set -e
mdadm --create /dev/md0 --run --assume-clean --level={level} --chunk={chunk_kib} \\
  --raid-devices={n} --metadata=1.2 --name={name} --homehost=srchost {members}
{mkfs} /dev/md0
mkdir -p /data && mount /dev/md0 /data
mkdir -p /data/db/sub
for i in $(seq 1 12); do
  head -c $(( (i * 977 + 13) * 1024 )) /dev/urandom >/data/db/file$i
done
head -c 3000000 /dev/urandom >/data/db/sub/large
(cd /data && find . -type f | sort | xargs sha256sum) >/work/sums
{cmds.ssm("discover", "discover", ArrayName=name)}
mdadm --detail --export /dev/md0 >/work/detail
blkid -p -o export /dev/md0 >/work/blkid
umount /data
mdadm --stop /dev/md0
"""
    b = record(f"create {level} x{n} {fs_type}", boot(work, scenario, disks, commands=cmds))
    assert b.rc == 0, b.text("scenario.stderr")[-3000:]
    detail = dict(line.split("=", 1) for line in b.text("detail").splitlines() if "=" in line)
    blkid = dict(line.split("=", 1) for line in b.text("blkid").splitlines() if "=" in line)
    return ArraySet(
        level=level,
        chunk_kib=chunk_kib,
        fs_type=fs_type,
        name=name,
        disks=disks,
        uuid=detail["MD_UUID"],
        fs_uuid=blkid["UUID"],
        sums=b.text("sums"),
        created=b,
    )


@pytest.fixture(scope="session")
def raid0_set(tmp_path_factory: pytest.TempPathFactory) -> ArraySet:
    # XFS refuses filesystems under 300 MB, hence 3 x 128 MiB.
    return create_array(
        tmp_path_factory.mktemp("raid0"),
        level="0",
        n=3,
        size_mib=128,
        chunk_kib=64,
        fs_type="xfs",
        name="db1",
        seed="raid0",
    )


@pytest.fixture(scope="session")
def raid10_set(tmp_path_factory: pytest.TempPathFactory) -> ArraySet:
    return create_array(
        tmp_path_factory.mktemp("raid10"),
        level="10",
        n=4,
        size_mib=64,
        chunk_kib=128,
        fs_type="ext4",
        name="logs",
        seed="raid10",
    )
