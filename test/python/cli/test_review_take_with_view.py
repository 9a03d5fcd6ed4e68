"""Review of takeWith in the CLI (``raidsnap backup db1 --with logs``): each test reproduces one
finding and fails on the code it was written against.

- A run refused because a named array has copies says so in the option's terms (--with).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import Cli, plain

from raidsnap_cli import inputs
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import ArrayFixture, add_array, configure_copies

WEST = {
    "id": "us-west-2",
    "region": "us-west-2",
    "account": "123456789012",
    "retention": 7,
    "stateMachineArn": "arn:aws:states:us-west-2:123456789012:stateMachine:raidsnap-copy",
}


@pytest.fixture
def cli(template: Path) -> Cli:
    return Cli(template)


def logs_copied(emu: Emulation, fx: ArrayFixture) -> None:
    add_array(emu.hosts, fx, "logs")
    configure_copies(emu, "logs", [WEST])


def test_a_named_array_with_copies_fails_the_run_naming_the_option_and_what_to_do(
    cli: Cli,
) -> None:
    result = cli("backup", "db1", "--emulation", "--with", "logs", prepare=logs_copied)

    assert result.exit_code == 1, result.output
    shown = plain(result.output)
    assert "FAILED backup backup-db1-" in shown
    assert "InvalidInput: takeWith (--with): logs has copies (to us-west-2)" in shown, shown
    assert "back logs up on its own, or start the backup for logs" in shown, shown
    assert "SUCCEEDED" not in shown


def test_a_bad_name_given_with_with_is_a_usage_error_naming_the_option() -> None:
    with pytest.raises(inputs.InputError) as refused:
        inputs.backup_input("db1", None, ["bad name"])
    assert refused.value.option == "--with"
    assert "'bad name' is not an array name" in refused.value.problem
