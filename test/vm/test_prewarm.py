"""Scenario 7: prewarm reads every byte of every member, with fio and with dd."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from vmlib import MIB, boot

from conftest import ArraySet, record

pytestmark = pytest.mark.vm


def test_prewarm_reads_every_byte_with_fio_and_dd(
    raid10_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    disks = raid10_set.copies(tmp_path / "disks", rng)
    vols = ",".join(d.volume_id for d in disks)
    scenario = f"""
run fio prewarm.sh SSM_VolumeIds={vols} SSM_Method=fio RAIDSNAP_PROGRESS_SECONDS=1
run dd prewarm.sh SSM_VolumeIds={vols} SSM_Method=dd RAIDSNAP_PROGRESS_SECONDS=1
run auto prewarm.sh SSM_VolumeIds={vols} SSM_Method=auto
"""
    b = record("prewarm fio+dd+auto", boot(tmp_path / "vm", scenario, disks))
    sizes = {d.volume_id: d.path.stat().st_size for d in disks}
    assert all(s == 64 * MIB for s in sizes.values())
    for name, method in (("fio", "fio"), ("dd", "dd"), ("auto", "fio")):
        assert b.rc_of(name) == 0, b.explain(name)
        out = b.json_of(name)
        assert out["ok"] is True and out["method"] == method
        assert out["bytes"] == sum(sizes.values()) == out["expectedBytes"]
        assert {d["volumeId"]: d["bytes"] for d in out["devices"]} == sizes
        assert out["seconds"] > 0
        mib, secs, rate = out["bytes"] / MIB, out["seconds"], out["mibPerSecond"]
        print(f"prewarm {name}: {mib:.0f} MiB in {secs}s ({rate} MiB/s)")
    assert "progress:" in b.text("fio.stderr") and "progress:" in b.text("dd.stderr")
