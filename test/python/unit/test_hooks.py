"""A backup's hooks: the input's, else the configuration's (HOOKS_BY_ARRAY), as document
parameters; never shell text."""

from __future__ import annotations

import json

import pytest

from raidsnap.errors import InvalidInputError
from raidsnap.hooks import Hooks, HooksChoice, document_parameters, hooks_for
from raidsnap.models import BackupInput, parse_input

CONFIGURED = {
    "db1": {
        "preSnapshot": "builtin:mysql-lock",
        "postSnapshot": "builtin:mysql-lock",
        "timeoutSeconds": 20,
        "commands": {"flush": "/usr/local/sbin/flush --all", "release": "/usr/local/sbin/release"},
    },
    "logs": {"commands": {"rotate": "/usr/local/sbin/rotate"}},
}


def choose(hooks: dict[str, object]) -> HooksChoice:
    return parse_input(BackupInput, {"array": "db1", "hooks": hooks}).hooks or HooksChoice()


def test_the_input_chooses_hooks_by_name_among_the_configured_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOOKS_BY_ARRAY", json.dumps(CONFIGURED))
    assert hooks_for("db1", None) == Hooks(
        preSnapshot="builtin:mysql-lock", postSnapshot="builtin:mysql-lock", timeoutSeconds=20
    )
    # a configured command by its name, with the array's time limit unless the run gives one
    assert hooks_for("db1", choose({"preSnapshot": "flush", "postSnapshot": "release"})) == Hooks(
        preSnapshot="/usr/local/sbin/flush --all",
        postSnapshot="/usr/local/sbin/release",
        timeoutSeconds=20,
    )
    # a ready-made hook needs no configuration
    assert hooks_for("logs", choose({"preSnapshot": "builtin:postgresql-checkpoint"})) == Hooks(
        preSnapshot="builtin:postgresql-checkpoint"
    )
    assert hooks_for("db1", choose({"preSnapshot": "builtin:mysql-lock", "timeoutSeconds": 9})) == (
        Hooks(preSnapshot="builtin:mysql-lock", postSnapshot="builtin:mysql-lock", timeoutSeconds=9)
    )
    # an empty hooks object in the input turns the configured ones off for this run
    assert hooks_for("db1", HooksChoice()) is None
    assert hooks_for("logs", None) is None


@pytest.mark.parametrize(
    ("array", "hooks", "field"),
    [
        # a command, even the very one the configuration names: a run gives names only
        ("db1", {"preSnapshot": "/usr/local/sbin/flush --all"}, "hooks.preSnapshot"),
        ("db1", {"postSnapshot": "/bin/sh"}, "hooks.postSnapshot"),
        # a name another array configures, or nobody does
        ("db1", {"preSnapshot": "rotate"}, "hooks.preSnapshot"),
        ("logs", {"preSnapshot": "flush"}, "hooks.preSnapshot"),
        ("nohooks", {"preSnapshot": "flush"}, "hooks.preSnapshot"),
        ("db1", {"preSnapshot": "builtin:oracle"}, "hooks.preSnapshot"),
    ],
)
def test_the_input_may_not_give_a_command_or_an_unconfigured_name(
    monkeypatch: pytest.MonkeyPatch, array: str, hooks: dict[str, object], field: str
) -> None:
    monkeypatch.setenv("HOOKS_BY_ARRAY", json.dumps(CONFIGURED))
    choice = parse_input(BackupInput, {"array": array, "hooks": hooks}).hooks
    with pytest.raises(InvalidInputError) as raised:
        hooks_for(array, choice)
    assert raised.value.field == field
    cause = str(raised.value)
    assert cause.startswith(f"{field}: ")
    assert "builtin:postgresql-checkpoint" in cause
    assert f"arrays.{array}.hooks.commands" in cause


def test_the_cause_lists_the_names_the_array_has(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKS_BY_ARRAY", json.dumps(CONFIGURED))
    with pytest.raises(InvalidInputError, match=r"flush, release"):
        hooks_for("db1", choose({"preSnapshot": "/usr/bin/id"}))


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
def test_a_hook_in_the_input_that_is_not_a_name_is_invalid(
    monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    monkeypatch.setenv("HOOKS_BY_ARRAY", json.dumps(CONFIGURED))
    with pytest.raises(InvalidInputError, match=r"hooks\.preSnapshot"):
        hooks_for("db1", choose({"preSnapshot": bad}))


PAIRED = {
    "db1": {
        "preSnapshot": "/usr/local/sbin/app-hook --pause",
        "postSnapshot": "/usr/local/sbin/app-hook --resume",
        "commands": {
            "pause": "/usr/local/sbin/app-hook --pause",
            "resume": "/usr/local/sbin/app-hook --resume",
            "flush": "/usr/local/sbin/flush",
        },
    }
}


@pytest.mark.parametrize(
    "hooks",
    [
        {"preSnapshot": "pause"},
        {"preSnapshot": "pause", "postSnapshot": "flush"},
        {"preSnapshot": "pause", "postSnapshot": "builtin:mysql-lock"},
    ],
)
def test_a_run_takes_the_configured_pre_hook_only_with_its_configured_post_hook(
    monkeypatch: pytest.MonkeyPatch, hooks: dict[str, object]
) -> None:
    monkeypatch.setenv("HOOKS_BY_ARRAY", json.dumps(PAIRED))
    with pytest.raises(InvalidInputError) as raised:
        hooks_for("db1", choose(hooks))
    assert raised.value.field == "hooks.postSnapshot"
    assert "/usr/local/sbin/app-hook --resume" in str(raised.value)


def test_a_run_may_take_the_configured_pair_or_another_pre_hook(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOOKS_BY_ARRAY", json.dumps(PAIRED))
    both = hooks_for("db1", choose({"preSnapshot": "pause", "postSnapshot": "resume"}))
    assert both is not None and both.postSnapshot == "/usr/local/sbin/app-hook --resume"
    other = hooks_for("db1", choose({"preSnapshot": "flush"}))
    assert other == Hooks(preSnapshot="/usr/local/sbin/flush")


@pytest.mark.parametrize(
    ("configured", "choice", "field"),
    [
        (
            {"db1": {"commands": {"resume": "/usr/local/sbin/r"}}},
            {"postSnapshot": "resume"},
            "hooks.postSnapshot",
        ),
        ({}, {"postSnapshot": "builtin:mysql-lock"}, "hooks.postSnapshot"),
        ({"db1": {"postSnapshot": "/usr/local/sbin/r"}}, None, "arrays.db1.hooks.postSnapshot"),
    ],
)
def test_a_post_hook_without_a_pre_hook_is_refused(
    monkeypatch: pytest.MonkeyPatch,
    configured: dict[str, object],
    choice: dict[str, object] | None,
    field: str,
) -> None:
    # it would never run: the post hook is owed once a pre hook started (ssm/scripts/freeze.sh)
    monkeypatch.setenv("HOOKS_BY_ARRAY", json.dumps(configured))
    with pytest.raises(InvalidInputError) as raised:
        hooks_for("db1", choose(choice) if choice is not None else None)
    assert raised.value.field == field
