"""Application hooks of a backup: given in the input (or the configuration), passed to the
freeze and thaw documents as parameters, and the set labelled with what it got."""

from __future__ import annotations

import json

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import make_array, sets_of, tags_of

HOOKS = {
    "preSnapshot": "builtin:postgresql-checkpoint",
    "postSnapshot": "/usr/local/sbin/db-hook --release",
    "timeoutSeconds": 30,
}


def consistency_of(set_id: str) -> set[str]:
    return {tags_of(s)["raidsnap:consistency"] for s in sets_of("db1")[set_id]}


def test_hooks_run_around_the_freeze_and_the_set_says_application(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3)
    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze", "hooks": HOOKS})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert consistency_of(run.output["setId"]) == {"application"}
    log = [e for e in emu.hosts.state(fx.instance_id).log if "snapshot" in e or "freeze" in e]
    assert log == [
        "pre-snapshot builtin:postgresql-checkpoint",
        "freeze /data",
        "post-snapshot /usr/local/sbin/db-hook --release",
    ]


def test_hooks_alone_with_crash_consistency_freeze_nothing(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3)
    run = emu.run("backup", {"array": "db1", "hooks": HOOKS})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert consistency_of(run.output["setId"]) == {"application"}
    log = emu.hosts.state(fx.instance_id).log
    assert "pre-snapshot builtin:postgresql-checkpoint" in log
    assert "freeze /data" not in log
    assert "post-snapshot /usr/local/sbin/db-hook --release" in log


def test_without_hooks_the_label_is_what_it_was(emu: Emulation) -> None:
    make_array(emu.hosts, "db1", 3)
    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert consistency_of(run.output["setId"]) == {"fsfreeze"}


def test_a_pre_hook_that_fails_fails_the_backup_by_name(emu: Emulation) -> None:
    make_array(emu.hosts, "db1", 3)
    line = {
        "ok": False,
        "error": "HookFailed",
        "message": "the pre-snapshot hook did not finish in 30s; /data was not frozen; "
        "post-snapshot hook: ok",
    }
    emu.hosts.fail_next(
        "freeze", CommandOutcome(status="Failed", stdout=json.dumps(line), exit_code=1)
    )
    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze", "hooks": HOOKS})
    assert (run.status, run.error) == ("FAILED", "HookFailed")
    assert "did not finish in 30s" in (run.cause or "")
    assert "post-snapshot hook: ok" in (run.cause or "")
    assert sets_of("db1") == {}


def test_a_hook_that_is_shell_text_is_refused_before_anything_runs(emu: Emulation) -> None:
    make_array(emu.hosts, "db1", 3)
    for bad in ("/usr/bin/psql -c CHECKPOINT; rm -rf /", "$(reboot)", "psql", "/x/../y"):
        run = emu.run("backup", {"array": "db1", "hooks": {"preSnapshot": bad}})
        assert (run.status, run.error) == ("FAILED", "InvalidInput"), bad
        assert "hooks.preSnapshot" in (run.cause or ""), run.cause
