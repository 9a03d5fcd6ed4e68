"""Review (second) of issue 24 on the emulation: what a backup says about its hooks, and the
label its set gets.

1. A thaw that never reports. The backup tolerates any thaw failure but HookFailed
   (aws.commands.poll: failOnError false), so a thaw that never runs, or is killed before it
   prints its last line, ends the run SUCCEEDED, its set labelled ``application``, with no word
   about the post hook. That happens when the instance is rebooting or its agent is gone when
   the thaw is sent: the invocation stays Pending/InProgress and the workflow cancels it at the
   end of its budget (120 s + HookSeconds; "If this time is reached and the command has not
   already started running, it doesn't run", SendCommand TimeoutSeconds; "Attempts to cancel
   the command ... There is no guarantee that the command will be terminated", CancelCommand,
   SSM API reference). After a reboot no guard is left on the instance (both live in /run and
   in systemd's transient units), so the post hook recorded in /var/lib/raidsnap runs only when
   the next freeze of that mount point comes, maybe a day later: a site's pause/resume pair
   leaves the application paused while the run said it succeeded. The README: "A post hook
   that fails or runs out of time in the thaw fails the backup with HookFailed"; one whose thaw
   never ran is no more confirmed.
2. A post hook given alone (configuration or run input) is accepted and never runs anywhere
   (freeze.sh owes a post hook only once a pre hook started; without a pre hook a crash backup
   sends no freeze or thaw at all): refuse it by name, or run it.
3. A pre hook slower than MaxFreezeSeconds labels an application-consistent set ``crash``
   (below).
4. A run may take the configuration's pause without its resume (below).
"""

from __future__ import annotations

import json

import pytest

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import make_array, sets_of, tags_of

CONFIGURED = {
    "db1": {
        "timeoutSeconds": 30,
        "commands": {
            "pause": "/usr/local/sbin/app-hook --pause",
            "resume": "/usr/local/sbin/app-hook --resume",
        },
    }
}
HOOKS = {"preSnapshot": "pause", "postSnapshot": "resume"}


@pytest.fixture(autouse=True)
def configured_hooks(emu: Emulation) -> None:
    for fn in emu.router.functions.values():
        if "HOOKS_BY_ARRAY" in fn.environment:
            fn.environment["HOOKS_BY_ARRAY"] = json.dumps(CONFIGURED)


def consistency_of(set_id: str) -> set[str]:
    return {tags_of(s)["raidsnap:consistency"] for s in sets_of("db1")[set_id]}


def test_a_thaw_that_never_reports_does_not_leave_the_run_succeeded_and_application(
    emu: Emulation,
) -> None:
    # GIVEN a backup whose pre hook paused the application and whose freeze succeeded
    fx = make_array(emu.hosts, "db1", 3)
    # WHEN its thaw never reports (the instance is rebooting, its agent gone): the workflow
    # cancels it at the end of its budget
    emu.hosts.fail_next(
        "thaw", CommandOutcome(status="Failed", unresponsive=True, duration_seconds=100_000)
    )
    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze", "hooks": HOOKS})
    log = emu.hosts.state(fx.instance_id).log
    assert "post-snapshot /usr/local/sbin/app-hook --resume" not in log, log
    # THEN the run does not say all went well: it fails by name, or at least says that the
    # post hook is not confirmed, and the set does not claim the application's help
    if run.status == "SUCCEEDED":
        notes = " ".join(run.output.get("notes") or [])
        assert "post" in notes.lower(), run.output
        assert consistency_of(run.output["setId"]) != {"application"}, run.output
    else:
        assert run.error == "HookFailed", (run.error, run.cause)


@pytest.mark.parametrize("consistency", ["fsfreeze", "crash"])
def test_a_post_hook_alone_is_refused_or_run(emu: Emulation, consistency: str) -> None:
    fx = make_array(emu.hosts, "db1", 3)
    run = emu.run(
        "backup",
        {"array": "db1", "consistency": consistency, "hooks": {"postSnapshot": "resume"}},
    )
    log = emu.hosts.state(fx.instance_id).log
    if run.status == "FAILED":
        assert run.error == "InvalidInput" and "postSnapshot" in (run.cause or ""), run.cause
    else:
        assert "post-snapshot /usr/local/sbin/app-hook --resume" in log, (run.status, log)


def test_a_slow_pre_hook_does_not_make_a_set_frozen_and_held_at_its_instant_crash(
    emu: Emulation,
) -> None:
    """The freeze guard's deadline is MaxFreezeSeconds from fsfreeze -f, after the pre hook
    (freeze.sh: rearm "$((begun + max_seconds))"; the script prints it as thawDeadline). The
    backup takes the guard's deadline to be SendCommand's RequestedDateTime + MaxFreezeSeconds
    (snapshot.send_freeze, frozenUntil) and labels a set whose snapshots start after that
    ``crash`` with a note that the filesystem "may already have been thawed". A pre hook that
    takes longer than MaxFreezeSeconds (60 s by default; HookSeconds allows 999: FLUSH TABLES
    WITH READ LOCK waits for the longest running query, pg_backup_start for a checkpoint) thus
    makes every set ``crash``, though the filesystem was frozen and the application held at its
    snapshot instant: the label says less than the set got, and the note is false."""
    make_array(emu.hosts, "db1", 3)
    pre_seconds = 90  # under HookSeconds (30 s configured, raised to 120 by the run below)
    line = {
        "ok": True,
        "mountPoint": "/data",
        "frozen": True,
        "freezeSeconds": 0.004,
        "guardPid": 4242,
        "maxFreezeSeconds": 60,
        # the instance's deadline: MaxFreezeSeconds after fsfreeze -f, once the pre hook ended
        "thawDeadline": "2099-01-01T00:00:00Z",
        "systemdTimer": None,
        "token": "0" * 32,
        "preSnapshot": "ok",
        "frozenAt": 4070908800 - 60,  # thawDeadline - maxFreezeSeconds
    }
    emu.hosts.fail_next(
        "freeze",
        CommandOutcome(status="Success", stdout=json.dumps(line), duration_seconds=pre_seconds),
    )
    run = emu.run(
        "backup",
        {
            "array": "db1",
            "consistency": "fsfreeze",
            "hooks": {**HOOKS, "timeoutSeconds": 120},
        },
    )
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert consistency_of(run.output["setId"]) == {"application"}, run.output.get("notes")


PAIRED = {
    "db1": {
        "timeoutSeconds": 30,
        "preSnapshot": "/usr/local/sbin/app-hook --pause",
        "postSnapshot": "/usr/local/sbin/app-hook --resume",
        "commands": {
            "pause": "/usr/local/sbin/app-hook --pause",
            "resume": "/usr/local/sbin/app-hook --resume",
        },
    }
}


def test_a_run_cannot_take_the_configured_pre_hook_without_its_post_hook(emu: Emulation) -> None:
    """The configuration pairs a site's own pause with its resume (preSnapshot/postSnapshot),
    as it pairs a held ready-made hook with its own post phase, which hooks._paired enforces for
    builtin:mysql-lock and builtin:postgresql-backup only. A run's input ("a hook not given does
    not run") may name the pause alone: the backup succeeds and nothing ever resumes the
    application. Whoever may start a backup thereby leaves the database paused, which the
    README says they may not decide ("which commands may run is decided by whoever deploys the
    stack ..., not by whoever may start a backup")."""
    for fn in emu.router.functions.values():
        if "HOOKS_BY_ARRAY" in fn.environment:
            fn.environment["HOOKS_BY_ARRAY"] = json.dumps(PAIRED)
    fx = make_array(emu.hosts, "db1", 3)
    run = emu.run(
        "backup", {"array": "db1", "consistency": "fsfreeze", "hooks": {"preSnapshot": "pause"}}
    )
    log = emu.hosts.state(fx.instance_id).log
    if run.status == "FAILED":
        assert run.error == "InvalidInput", run.cause
        assert log == []
    else:
        assert "post-snapshot /usr/local/sbin/app-hook --resume" in log, (run.status, log)
