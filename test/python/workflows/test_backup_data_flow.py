"""The backup state machine's data flow, as synthesized: each Task reads named keys and writes its
own, every key a state reads is there on every path that reaches it, and the failure path still
finds what it must thaw and let go of whichever step failed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dataflow import definition_of

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import backed_up, make_array, sets_of


def backup_definition(template: Path) -> dict[str, Any]:
    return definition_of(template, "backup")


def test_every_backup_task_reads_named_keys_and_writes_its_own(template: Path) -> None:
    states = backup_definition(template)["States"]
    tasks = {n: s for n, s in states.items() if s["Type"] == "Task"}
    whole = {
        n: s.get("ResultPath", "$") for n, s in tasks.items() if s.get("ResultPath", "$") == "$"
    }
    # Prepare, the first state, replaces the input as sent (nothing a step wrote yet) with the
    # run's object, its named keys made by its ResultSelector (no freeze or thaw yet: every path
    # reads them).
    assert whole == {"Prepare": "$"}
    assert sorted(states["Prepare"]["ResultSelector"]) == ["freeze", "members", "plan.$", "thaw"]
    assert backup_definition(template)["StartAt"] == "Prepare"
    unnamed = sorted(n for n, s in tasks.items() if "Parameters" not in s)
    assert unnamed == []


@pytest.mark.parametrize("consistency", ["crash", "fsfreeze"])
def test_a_backup_that_fails_taking_its_snapshots_thaws_and_lets_restores_run(
    emu: Emulation, consistency: str
) -> None:
    # GIVEN an array with a complete set, whose next CreateSnapshots keeps failing
    fx = make_array(emu.hosts, "db1", 3)
    before = backed_up(emu.hosts, emu.run, fx)
    emu.double.fail("ec2", "CreateSnapshots", times=5, code="InternalError")
    mark = len(emu.double.calls)
    # WHEN a backup runs (after freezing the filesystem, for fsfreeze)
    run = emu.run("backup", {"array": "db1", "consistency": consistency})
    # THEN it fails, leaves the filesystem thawed (one thaw, fsfreeze only) and no new set
    assert run.status == "FAILED"
    assert run.error
    assert emu.hosts.state(fx.instance_id).frozen == set()
    sent = [c.params.get("DocumentName") for c in emu.double.calls[mark:] if c.applied]
    assert sent.count("raidsnap-thaw") == (1 if consistency == "fsfreeze" else 0)
    assert set(sets_of("db1")) == {before}
    # AND its hold on the array is gone: a restore of the set it had starts and succeeds
    restore = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert restore.status == "SUCCEEDED", restore.cause
    assert restore.output["setId"] == before
