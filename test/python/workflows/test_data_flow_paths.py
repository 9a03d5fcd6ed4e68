"""Every key a state reads is there on every path that reaches it, in each state machine as
synthesized: a missing one would end the run with States.Runtime, past every Catch and so past
the clean-up (see dataflow.py for the rule and its sources)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dataflow import definition_of, keys_on_entry, unguarded_reads


@pytest.mark.parametrize("machine", ["backup", "restore", "drill", "recovery"])
def test_every_key_a_state_reads_is_there_on_every_path_to_it(template: Path, machine: str) -> None:
    definition = definition_of(template, machine)
    assert unguarded_reads(definition) == {}
    assert set(keys_on_entry(definition)) == set(definition["States"]), "every state is reachable"


def test_the_check_finds_a_read_that_a_caught_failure_skips() -> None:
    # B writes "b"; when B fails, its Catch goes to C, which reads "b": missing on that path.
    definition = {
        "StartAt": "A",
        "States": {
            "A": {"Type": "Pass", "Parameters": {"a": 1}, "Next": "B"},
            "B": {
                "Type": "Task",
                "Resource": "x",
                "Parameters": {"a.$": "$.a"},
                "ResultPath": "$.b",
                "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "C"}],
                "Next": "C",
            },
            "C": {"Type": "Task", "Resource": "x", "Parameters": {"b.$": "$.b"}, "End": True},
        },
    }
    assert unguarded_reads(definition) == {"C": ["b"]}
