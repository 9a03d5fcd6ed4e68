"""Host side of the VM tests: disk images with EBS-like serials, one boot per scenario."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "scripts" / "vm" / "run.sh"
ENSURE = REPO / "scripts" / "vm" / "ensure.sh"
GUEST_LIB = Path(__file__).resolve().parent / "guest" / "lib.sh"
MIB = 1024 * 1024


def new_volume_id(rng: random.Random) -> str:
    """An EBS-shaped id: vol- plus 17 hex digits, so the serial (without dash) is 20 chars."""
    return "vol-0" + "".join(rng.choice("0123456789abcdef") for _ in range(16))


@dataclass
class Disk:
    path: Path
    volume_id: str

    @property
    def serial(self) -> str:
        return self.volume_id.replace("-", "")

    def sha256(self) -> str:
        h = hashlib.sha256()
        with self.path.open("rb") as f:
            for block in iter(lambda: f.read(4 * MIB), b""):
                h.update(block)
        return h.hexdigest()


def blank_disk(path: Path, size_mib: int, volume_id: str) -> Disk:
    with path.open("wb") as f:
        f.truncate(size_mib * MIB)
    return Disk(path, volume_id)


def copy_disk(src: Disk, dest: Path, volume_id: str) -> Disk:
    """The "snapshot": a byte copy of the image under a new volume id."""
    subprocess.run(["cp", "--sparse=always", str(src.path), str(dest)], check=True)
    return Disk(dest, volume_id)


@dataclass
class Boot:
    work: Path
    rc: int
    seconds: float
    outputs: dict[str, str] = field(default_factory=dict)

    def text(self, name: str) -> str:
        p = self.work / name
        return p.read_text() if p.exists() else ""

    def rc_of(self, name: str) -> int:
        return int(self.text(f"{name}.rc").strip())

    def json_of(self, name: str) -> dict:
        """The last stdout line of a script run, parsed as JSON (what SSM hands the caller)."""
        lines = self.text(f"{name}.stdout").strip().splitlines()
        assert lines, f"{name}: no stdout; stderr: {self.text(name + '.stderr')[-2000:]}"
        return json.loads(lines[-1])

    def explain(self, name: str) -> str:
        return (
            f"{name}: rc={self.text(name + '.rc').strip()}\n"
            f"stdout:\n{self.text(name + '.stdout')[-3000:]}\n"
            f"stderr:\n{self.text(name + '.stderr')[-3000:]}"
        )


def boot(
    work: Path,
    scenario: str,
    disks: list[Disk],
    *,
    udev: bool = False,
    timeout: int = 300,
    shuffle_seed: int | None = 7,
    extra_args: list[str] | None = None,
    files: dict[str, str] | None = None,
) -> Boot:
    """Boot once, run `scenario` (bash, with guest/lib.sh sourced), return what it left."""
    work.mkdir(parents=True, exist_ok=True)
    shutil.copy(GUEST_LIB, work / "lib.sh")
    for name, content in (files or {}).items():
        (work / name).write_text(content)
    (work / "scenario.sh").write_text("set -u\n. /work/lib.sh\n" + scenario)
    order = list(disks)
    if shuffle_seed is not None:
        # Present the disks in an order unrelated to their slots, as EC2 attachments are.
        random.Random(shuffle_seed).shuffle(order)
    cmd = ["bash", str(RUN), "--work", str(work), "--timeout", str(timeout)]
    for d in order:
        cmd += ["--disk", f"{d.path}:{d.serial}"]
    if udev:
        cmd.append("--udev")
    cmd += extra_args or []
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout + 30)
    seconds = float((work / "vm-seconds").read_text()) if (work / "vm-seconds").exists() else -1.0
    if proc.returncode in (124, 125):
        raise AssertionError(f"VM did not finish the scenario: {proc.stderr[-3000:]}")
    return Boot(work=work, rc=proc.returncode, seconds=seconds)


def ensure_vm() -> None:
    if os.environ.get("RAIDSNAP_VM_SKIP_ENSURE") == "1":
        return
    subprocess.run(["bash", str(ENSURE)], check=True, capture_output=True, text=True)
