"""A backup's hooks: the input's, else the configuration's (HOOKS_BY_ARRAY), as document
parameters; never shell text."""

from __future__ import annotations

import json

import pytest

from raidsnap.errors import InvalidInputError
from raidsnap.hooks import Hooks, document_parameters, hooks_for
from raidsnap.models import BackupInput, parse_input

CONFIGURED = {"db1": {"preSnapshot": "builtin:mysql-lock", "postSnapshot": "builtin:mysql-lock"}}


def test_the_input_overrides_the_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKS_BY_ARRAY", json.dumps(CONFIGURED))
    assert hooks_for("db1", None) == Hooks(
        preSnapshot="builtin:mysql-lock", postSnapshot="builtin:mysql-lock"
    )
    given = Hooks(preSnapshot="/usr/local/sbin/flush --all", timeoutSeconds=9)
    assert hooks_for("db1", given) == given
    # an empty hooks object in the input turns the configured ones off for this run
    assert hooks_for("db1", Hooks()) is None
    assert hooks_for("logs", None) is None


def test_document_parameters_name_every_hook_parameter() -> None:
    hooks = Hooks(preSnapshot="builtin:postgresql-checkpoint", timeoutSeconds=45)
    assert document_parameters(hooks, freeze=False) == {
        "PreSnapshot": "builtin:postgresql-checkpoint",
        "PostSnapshot": "",
        "HookSeconds": "45",
        "Freeze": "false",
    }
    assert document_parameters(None, freeze=True) == {}


@pytest.mark.parametrize(
    "bad",
    ["psql -c CHECKPOINT", "/bin/sh -c reboot;", "/x/$(id)", "/x `id`", "/a/../b", "/x a/b"],
)
def test_a_hook_in_the_input_that_is_not_an_argument_vector_is_invalid(bad: str) -> None:
    with pytest.raises(InvalidInputError, match=r"hooks\.preSnapshot"):
        parse_input(BackupInput, {"array": "db1", "hooks": {"preSnapshot": bad}})
