"""The restore state machine as deployed: each Task is sent the keys it reads and writes its
result to a key of its own, so no step can overwrite what another recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from raidsnap.workflows.sweeper import ASSEMBLE_STATE
from raidsnap_emulation.template import Template


def restore_states(template: Path) -> dict[str, dict[str, Any]]:
    (definition,) = [
        d for name, d in Template(template).state_machines().values() if name == "restore"
    ]
    states: dict[str, dict[str, Any]] = json.loads(definition)["States"]
    return states


def test_every_restore_task_names_what_it_reads_and_writes_its_own_key(template: Path) -> None:
    tasks = {n: s for n, s in restore_states(template).items() if s["Type"] == "Task"}
    replacing = sorted(n for n, s in tasks.items() if s.get("ResultPath", "$") == "$")
    unnamed = sorted(n for n, s in tasks.items() if "Parameters" not in s)
    assert (replacing, unnamed) == ([], [])
    # Only the steps that must see whatever the run got to are sent the whole object (the
    # report of a mounted array is the output so far, as Finish shapes it at the end).
    whole = sorted(n for n, s in tasks.items() if "$" in s["Parameters"].values())
    assert whole == ["Cleanup", "Finish", "ReportMounted"]


def test_the_sweeper_asks_for_a_state_the_restore_has(template: Path) -> None:
    # The sweeper keeps a run's volumes once its history shows this state entered: a name the
    # definition no longer has would make every restore look as if it never assembled.
    states = restore_states(template)
    assert states[ASSEMBLE_STATE]["Parameters"]["step"] == "assemble"
