"""Scenario 7: prewarm reads every byte of every member, with fio and with dd."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from vmlib import MIB, Commands, boot

from conftest import ArraySet, record

pytestmark = pytest.mark.vm


def test_prewarm_reads_every_byte_with_fio_and_dd(
    raid10_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    disks = raid10_set.copies(tmp_path / "disks", rng)
    vols = ",".join(d.volume_id for d in disks)
    cmds = Commands()
    fast = {"RAIDSNAP_PROGRESS_SECONDS": "1"}  # the agent's own environment, passed through
    scenario = f"""
{cmds.ssm("fio", "prewarm", fast, VolumeIds=vols, Method="fio")}
{cmds.ssm("dd", "prewarm", fast, VolumeIds=vols, Method="dd")}
{cmds.ssm("auto", "prewarm", VolumeIds=vols)}
"""
    b = record("prewarm fio+dd+auto", boot(tmp_path / "vm", scenario, disks, commands=cmds))
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
