"""Review of takeWith in the CLI (``raidsnap backup db1 --with logs``): each test reproduces one
finding and fails on the code it was written against.

- A run refused because a named array has copies says so in the option's terms (--with).
- A named array's retention (sets kept, deleted) is shown as the started array's is, and its
  notes (under its name) with the run's.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
from cli_runner import Cli, plain
from rich.console import Console

from raidsnap_cli import inputs
from raidsnap_cli.views import output_view
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


def shown(output: dict[str, Any]) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(output_view("backup", output))
    return console.export_text()


def retention(keep: int, kept: list[str], deleted: list[str]) -> dict[str, Any]:
    return {
        "keep": keep,
        "keptSets": kept,
        "deletedSets": deleted,
        "deletedSnapshots": 2 * len(deleted),
        "notDeleted": [],
        "unrecordedSnapshots": [],
        "unrecordedCount": 0,
    }


OUTPUT: dict[str, Any] = {
    "array": "db1",
    "setId": "db1-20260105T030000Z-1a2b3c4d",
    "instanceId": "i-0123456789abcdef0",
    "consistency": "fsfreeze",
    "snapshotIds": ["snap-0000000000000000a"],
    "memberVolumeIds": ["vol-0000000000000000a"],
    "discovery": "discovery",
    "notes": [
        "logs: the snapshots started 12 s after the freeze guard's deadline; the set is "
        "labelled crash-consistent"
    ],
    "retention": retention(7, ["db1-20260105T030000Z-1a2b3c4d"], []),
    "together": [
        {
            "array": "logs",
            "setId": "logs-20260105T030000Z-1a2b3c4d",
            "consistency": "crash",
            "snapshotIds": ["snap-0000000000000000b", "snap-0000000000000000c"],
            "memberVolumeIds": ["vol-0000000000000000b", "vol-0000000000000000c"],
            "retention": retention(
                2,
                ["logs-20260105T030000Z-1a2b3c4d", "logs-20260104T030000Z-1a2b3c4d"],
                ["logs-20260103T030000Z-1a2b3c4d"],
            ),
        }
    ],
}


def test_a_named_arrays_retention_is_shown_as_the_started_arrays_is() -> None:
    text = shown(OUTPUT)
    assert re.search(r"^retention\s+keeps 1 of at most 7 sets; deleted 0\s*$", text, re.M), text
    assert re.search(
        r"^logs retention\s+keeps 2 of at most 2 sets; "
        r"deleted 1: logs-20260103T030000Z-1a2b3c4d\s*$",
        text,
        re.MULTILINE,
    ), text
    # after the line of its set
    assert text.index("with logs") < text.index("logs retention")


def test_a_named_arrays_note_is_shown_under_its_name() -> None:
    assert re.search(r"^note\s+logs: the snapshots started 12 s after", shown(OUTPUT), re.M)
