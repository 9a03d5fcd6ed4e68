"""Review of takeWith (several arrays of one instance in one CreateSnapshots call): each test
reproduces one finding on the real state machine and fails on the code it was written against.

- A run's takeWith naming an array with copies, or with a fastRestore policy, is refused at
  Prepare (InvalidInput, field takeWith) before anything is held or sent: those run only for
  the array a backup is started for, so the named array's would silently not run.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_backup_together import create_snapshots, two

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import configure_copies, configure_fast_restore

ZONE = "us-east-1a"


# A place the named array's sets are copied to (never reached: the run is refused first).
WEST = {
    "id": "us-west-2",
    "region": "us-west-2",
    "account": "123456789012",
    "retention": 7,
    "stateMachineArn": "arn:aws:states:us-west-2:123456789012:stateMachine:raidsnap-copy",
}


def changes_after(emu: Emulation, mark: int) -> list[str]:
    """Every SendCommand and every write to a table after ``mark``: what holding an array or
    reaching the instance does."""
    return [
        f"{c.service}:{c.operation}"
        for c in emu.double.calls[mark:]
        if c.applied
        and (
            c.operation == "SendCommand"
            or (c.service == "dynamodb" and c.operation in ("PutItem", "UpdateItem", "DeleteItem"))
        )
    ]


@pytest.mark.parametrize(
    ("configure", "what"),
    [
        (lambda emu, array: configure_copies(emu, array, [WEST]), "has copies"),
        (lambda emu, array: configure_fast_restore(emu, array, [ZONE]), "has a fastRestore policy"),
    ],
    ids=["copies", "fastRestore"],
)
def test_a_named_array_whose_copies_or_fast_restore_would_not_run_is_refused_at_prepare(
    emu: Emulation, configure: Any, what: str
) -> None:
    # GIVEN db1 and logs on one instance, logs configured with copies (or a fastRestore policy)
    two(emu)
    configure(emu, "logs")
    mark = len(emu.double.calls)
    # WHEN db1 is backed up with logs (raidsnap backup db1 --with logs)
    run = emu.run("backup", {"array": "db1", "takeWith": ["logs"]})
    # THEN the run fails InvalidInput on takeWith, naming logs, what it has and what to do
    assert (run.status, run.error) == ("FAILED", "InvalidInput"), run.cause
    cause = str(run.cause)
    assert cause.startswith(f"takeWith: logs {what}"), cause
    assert "back logs up on its own" in cause and "start the backup for logs" in cause, cause
    # AND nothing was held, sent or taken
    assert changes_after(emu, mark) == []
    assert not create_snapshots(emu)
    # AND db1 alone backs up at once (no hold was left)
    alone = emu.run("backup", {"array": "db1"})
    assert alone.status == "SUCCEEDED", f"{alone.error}: {alone.cause}"
