"""Review of takeWith (several arrays of one instance in one CreateSnapshots call): each test
reproduces one finding on the real state machine and fails on the code it was written against.

- A run's takeWith naming an array with copies, or with a fastRestore policy, is refused at
  Prepare (InvalidInput, field takeWith) before anything is held or sent: those run only for
  the array a backup is started for, so the named array's would silently not run.
- A named array's set that gets less than asked (its freeze guard's deadline passed before the
  snapshots started) says why in the run's notes, under the array's name.
- After a failure with several arrays frozen, the thaw that runs the hooked array's post hook
  is sent only once every other thaw ended (or a bounded wait ran out, which the cause says):
  thaws sent back to back run at once on the agent (up to 5 commands at a time), so the post
  hook could run while another filesystem was still frozen.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_backup_together import create_snapshots, snapshot_between_the_guards, two

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    HeldStep,
    configure_copies,
    configure_fast_restore,
)

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


def test_a_named_arrays_lower_consistency_is_explained_in_the_output_by_its_name(
    emu: Emulation,
) -> None:
    # GIVEN db1 (/data) and logs (/logs, frozen second: name order), fsfreeze; the snapshot
    # step starts after the guard of /logs ran out (it ends first) but while db1's still held
    fx, _, _ = two(emu)
    held = HeldStep(emu, "backup_snapshot")
    arn = emu.start("backup", {"array": "db1", "takeWith": ["logs"], "consistency": "fsfreeze"})
    held.wait()
    snapshot_between_the_guards(emu, fx.instance_id, held)
    run = emu.wait(arn)
    # THEN logs' set says crash, and the output's notes say why, under logs' name
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    (part,) = run.output["together"]
    assert (run.output["consistency"], part["consistency"]) == ("fsfreeze", "crash")
    said = [n for n in run.output["notes"] if "guard" in n]
    assert len(said) == 1 and said[0].startswith("logs: the snapshots started"), said
    assert "crash-consistent" in said[0]


# logs' hooks: its thaw runs the post hook, which must come once every other array is thawed.
LOGS_HOOKS = {
    "logs": {
        "timeoutSeconds": 20,
        "preSnapshot": "/usr/local/sbin/db-hook --hold",
        "postSnapshot": "/usr/local/sbin/db-hook --release",
    }
}


def thaws(emu: Emulation) -> list[Any]:
    return [
        c for c in emu.double.calls if c.applied and c.params.get("DocumentName") == "raidsnap-thaw"
    ]


def failed_while_frozen(emu: Emulation) -> Any:
    """db1 backed up with logs (hooked), fsfreeze, and CreateSnapshots refused (not throttling:
    no retry) once both are frozen: ExplainFailure thaws both."""
    fx, _, _ = two(emu)
    assert emu.router is not None
    for fn in emu.router.functions.values():
        if "HOOKS_BY_ARRAY" in fn.environment:
            fn.environment["HOOKS_BY_ARRAY"] = json.dumps(LOGS_HOOKS)
    emu.double.fail("ec2", "CreateSnapshots", times=5, code="UnauthorizedOperation")
    run = emu.run("backup", {"array": "db1", "takeWith": ["logs"], "consistency": "fsfreeze"})
    assert run.status == "FAILED", run.output
    return fx, run


def test_after_a_failure_the_hooked_arrays_thaw_is_sent_once_every_other_thaw_ended(
    emu: Emulation,
) -> None:
    fx, run = failed_while_frozen(emu)
    # THEN /data is thawed first; ExplainFailure asks how its thaw went, and sends the thaw of
    # /logs (which runs logs' post hook) only once the thaw of /data ended (it takes 1 s)
    data, logs = thaws(emu)
    assert data.params["Parameters"]["MountPoint"] == ["/data"]
    assert logs.params["Parameters"]["MountPoint"] == ["/logs"]
    assert logs.params["Parameters"]["PostSnapshot"] == ["/usr/local/sbin/db-hook --release"]
    asked = [
        c
        for c in emu.double.calls
        if c.operation == "GetCommandInvocation" and "BackupFailed" in str(c.actor)
    ]
    assert asked and all(data.time <= c.time <= logs.time for c in asked), asked
    assert (logs.time - data.time).total_seconds() >= 1
    # AND the post hook ran after both filesystems were thawed; nothing is left frozen
    host = emu.hosts.state(fx.instance_id)
    assert (host.frozen, host.guards, host.hooks_owed) == (set(), {}, {})
    assert "had not ended" not in str(run.cause)


def test_a_thaw_that_does_not_end_in_time_still_lets_the_hooked_thaw_go_and_the_cause_says_so(
    emu: Emulation,
) -> None:
    # GIVEN the agent answers nothing more for the thaw of /data ExplainFailure sends
    emu.hosts.fail_next("thaw", CommandOutcome(duration_seconds=100_000, unresponsive=True))
    fx, run = failed_while_frozen(emu)
    # THEN the thaw of /logs (its post hook) is still sent, after a bounded wait, and the cause
    # says the thaw of /data had not ended then
    data, logs = thaws(emu)
    assert logs.params["Parameters"]["MountPoint"] == ["/logs"]
    waited = (logs.time - data.time).total_seconds()
    assert 10 <= waited <= 60, waited
    cause = str(run.cause)
    assert "the thaw of /data had not ended" in cause and "post hook of logs" in cause, cause
    assert emu.hosts.state(fx.instance_id).hooks_owed == {}
