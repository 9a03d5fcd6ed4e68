"""Review of the group freeze guards (freeze.sh group_deadline, FreezeWindowClosed)."""

from __future__ import annotations

import json

import boto3
from test_backup_together import two

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import make_array


def set_max_freeze_seconds(emu: Emulation, seconds: int) -> None:
    """defaults.maxFreezeSeconds (lib/config.ts accepts 1-900) as the functions get it."""
    assert emu.router is not None
    for fn in emu.router.functions.values():
        if "MAX_FREEZE_SECONDS" in fn.environment:
            fn.environment["MAX_FREEZE_SECONDS"] = str(seconds)


def test_a_max_freeze_seconds_a_group_cannot_fit_in_is_refused_before_anything_changes(
    emu: Emulation,
) -> None:
    # GIVEN db1 and logs of one instance, and defaults.maxFreezeSeconds 12: the second freeze
    # comes 3 s or more after the first, ends 2 s before it and needs 10 s for the snapshots
    two(emu)
    set_max_freeze_seconds(emu, 12)
    # WHEN db1 is backed up with logs, fsfreeze-consistent
    run = emu.run("backup", {"array": "db1", "takeWith": ["logs"], "consistency": "fsfreeze"})
    # THEN the run is refused before anything is held, sent or snapshotted, saying what it needs
    assert (run.status, run.error) == ("FAILED", "InvalidInput"), run.cause
    assert "need a MaxFreezeSeconds of at least 15 s" in str(run.cause)
    assert "raise it, or take fewer arrays together" in str(run.cause)
    assert not [
        c
        for c in emu.double.calls
        if c.operation in ("SendCommand", "CreateSnapshots", "PutItem", "UpdateItem")
    ]


def test_a_two_array_fsfreeze_group_fits_in_a_small_max_freeze_seconds(emu: Emulation) -> None:
    # GIVEN db1 and logs, and defaults.maxFreezeSeconds 20
    two(emu)
    set_max_freeze_seconds(emu, 20)
    # WHEN db1 is backed up with logs, fsfreeze-consistent
    run = emu.run("backup", {"array": "db1", "takeWith": ["logs"], "consistency": "fsfreeze"})
    # THEN the run takes both sets, each filesystem frozen through the call
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    (part,) = run.output["together"]
    assert (run.output["consistency"], part["consistency"]) == ("fsfreeze", "fsfreeze")


def freeze_by_hand(
    emu: Emulation,
    instance_id: str,
    mount: str,
    token: str,
    seconds: int,
    *,
    answer_after: float = 5,
) -> dict:
    """The freeze document sent directly, and its JSON line once ``answer_after`` seconds went."""
    ssm = boto3.client("ssm")
    sent = ssm.send_command(
        DocumentName=emu.document_names["freeze"],
        InstanceIds=[instance_id],
        Parameters={
            "MountPoint": [mount],
            "MaxFreezeSeconds": [str(seconds)],
            "FreezeToken": [token],
        },
    )["Command"]
    emu.clock.advance(answer_after)
    inv = ssm.get_command_invocation(CommandId=sent["CommandId"], InstanceId=instance_id)
    return json.loads(inv["StandardOutputContent"].strip().splitlines()[-1])


def test_a_freeze_after_the_last_ones_guard_fired_is_not_refused_as_already_frozen(
    emu: Emulation,
) -> None:
    # GIVEN /data frozen by a run whose workflow then died: its guard thaws it after 30 s
    # (freeze.sh's detached guard and systemd timer fire on time, whatever else happens)
    fx = make_array(emu.hosts, "db1", 3)
    first = freeze_by_hand(emu, fx.instance_id, "/data", "a" * 32, 30)
    assert first["ok"] is True, first
    # WHEN, a minute later, the next run freezes /data
    emu.clock.advance(60)
    second = freeze_by_hand(emu, fx.instance_id, "/data", "b" * 32, 30)
    # THEN it freezes it, as freeze.sh does: the old guard is gone (guard_pid finds none), so
    # nothing refuses it. The emulation checks AlreadyFrozen before it lets the guards whose
    # deadline came fire (host.py _do_freeze: _fire_guards after the guard check)
    assert second["ok"] is True, second
