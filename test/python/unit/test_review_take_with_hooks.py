"""Review of takeWith: which arrays of a group count as having hooks. The synth check
(lib/take-with.ts checkTakeWith, by lib/hooks-config.ts hooksRun) and the run's own check
(raidsnap.workflows.backup.together.others, by raidsnap.hooks.hooks_for) must agree: an array
has hooks where its backups run them by default (a preSnapshot, or a postSnapshot, given); a
hooks block with only named commands runs nothing unless a run names them. The cases are those
of test/review-take-with.test.ts."""

from __future__ import annotations

import json

import pytest

from raidsnap.errors import InvalidInputError
from raidsnap.hooks import hooks_for
from raidsnap.models import BackupInput, parse_input
from raidsnap.workflows.backup import together

COMMANDS = {
    "commands": {
        "hold": "/usr/local/sbin/db-hook --hold",
        "release": "/usr/local/sbin/db-hook --release",
    }
}
PRE = {"preSnapshot": "/usr/local/sbin/db-hook --hold"}


@pytest.mark.parametrize(
    ("hooks", "runs"),
    [
        ({"timeoutSeconds": 30}, False),
        ({**COMMANDS, "timeoutSeconds": 30}, False),
        (PRE, True),
        ({**PRE, "postSnapshot": "/usr/local/sbin/db-hook --release"}, True),
        ({"preSnapshot": "builtin:postgresql-checkpoint", **COMMANDS}, True),
    ],
)
def test_an_arrays_configured_hooks_run_by_default_only_with_a_pre_or_post_hook(
    monkeypatch: pytest.MonkeyPatch, hooks: dict[str, object], runs: bool
) -> None:
    monkeypatch.setenv("HOOKS_BY_ARRAY", json.dumps({"logs": hooks}))
    assert (hooks_for("logs", None) is not None) is runs


@pytest.mark.parametrize(
    "configured",
    [
        {"db1": COMMANDS, "logs": PRE},
        {"db1": PRE, "logs": COMMANDS},
        {"db1": COMMANDS, "logs": {**COMMANDS, "timeoutSeconds": 30}},
    ],
    ids=["named-hooked", "started-hooked", "neither"],
)
def test_a_hooks_block_of_named_commands_alone_is_not_a_second_hooked_array(
    monkeypatch: pytest.MonkeyPatch, configured: dict[str, object]
) -> None:
    monkeypatch.setenv("HOOKS_BY_ARRAY", json.dumps(configured))
    request = parse_input(BackupInput, {"array": "db1", "takeWith": ["logs"]})
    assert together.others(request, hooks_for("db1", None)) == ["logs"]


def test_two_arrays_whose_backups_run_hooks_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKS_BY_ARRAY", json.dumps({"db1": {**PRE, **COMMANDS}, "logs": PRE}))
    request = parse_input(BackupInput, {"array": "db1", "takeWith": ["logs"]})
    with pytest.raises(InvalidInputError, match="db1 and logs both have hooks"):
        together.others(request, hooks_for("db1", None))
