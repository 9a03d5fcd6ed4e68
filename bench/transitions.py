"""State transitions and wall time of backups and restores on the emulation, by member count.

Not a test: a measurement to read. The AWS steps complete at once (snapshots, volumes and
attachments take no virtual time), so what is left is the workflows' own shape: the number of
transitions must not grow with the number of members.

    .venv/bin/python bench/transitions.py
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
import time
import warnings

# The packages come from .venv, where `make setup` installs them (pyproject.toml).
from raidsnap_emulation.harness import Emulation, Execution
from raidsnap_emulation.world import launch_instance, make_array, name_in_config, terminate


def _instant(emu: Emulation) -> None:
    emu.double.snapshot_seconds = 0
    emu.double.volume_seconds = 0
    emu.double.attach_seconds = 0
    emu.double.detach_seconds = 0


def backup(members: int) -> tuple[Execution, float]:
    with Emulation() as emu:
        _instant(emu)
        make_array(emu.hosts, "db1", members)
        started = time.perf_counter()
        run = emu.run("backup", {"array": "db1"})
        return run, time.perf_counter() - started


def restore(members: int) -> tuple[Execution, float]:
    with Emulation() as emu:
        _instant(emu)
        fx = make_array(emu.hosts, "db1", members)
        taken = emu.run("backup", {"array": "db1"})
        if taken.status != "SUCCEEDED":
            raise SystemExit(f"backup for the restore failed: {taken.error}: {taken.cause}")
        terminate(fx.instance_id)
        target = launch_instance("db1-new", fx.availability_zone, tag_array=False)
        # A restore acts only on an instance the array's record, its tag or the config names.
        name_in_config(emu, "db1", target)
        started = time.perf_counter()
        run = emu.run(
            "restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"}
        )
        return run, time.perf_counter() - started


def main() -> int:
    # The functions' metric lines and the executor's logs are not what this script measures.
    logging.getLogger("moto").setLevel(logging.CRITICAL)
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    rows = []
    for workflow, members, measure in (
        ("backup", 3, backup),
        ("backup", 8, backup),
        ("restore", 2, restore),
        ("restore", 8, restore),
        ("restore", 16, restore),
    ):
        with contextlib.redirect_stdout(io.StringIO()):
            run, seconds = measure(members)
        if run.status != "SUCCEEDED":
            print(f"{workflow} N={members} {run.status}: {run.error}: {run.cause}", file=sys.stderr)
            return 1
        rows.append((workflow, members, run.transitions, seconds))
    print(f"{'workflow':<10}{'members':>8}{'transitions':>13}{'wall s':>9}")
    for workflow, members, transitions, seconds in rows:
        print(f"{workflow:<10}{members:>8}{transitions:>13}{seconds:>9.2f}")
    by_workflow: dict[str, set[int]] = {}
    for workflow, _, transitions, _ in rows:
        by_workflow.setdefault(workflow, set()).add(transitions)
    grows = [w for w, counts in by_workflow.items() if len(counts) > 1]
    if grows:
        print(f"transitions depend on the member count in: {', '.join(grows)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
