"""Application hooks of a backup: given in the input (or the configuration), passed to the
freeze and thaw documents as parameters, and the set labelled with what it got."""

from __future__ import annotations

import json

import pytest

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import make_array, sets_of, tags_of

# The array's hooks as arrays.db1.hooks in a config file sets them: its own commands, named.
CONFIGURED = {
    "db1": {
        "timeoutSeconds": 30,
        "commands": {
            "hold": "/usr/local/sbin/db-hook --hold",
            "release": "/usr/local/sbin/db-hook --release",
        },
    }
}
# What a run chooses among them, by name. (A site's own pre hook is taken to hold the
# application; builtin:postgresql-checkpoint holds nothing and leaves the filesystem's label.)
HOOKS = {"preSnapshot": "hold", "postSnapshot": "release"}


@pytest.fixture(autouse=True)
def configured_hooks(emu: Emulation) -> None:
    for fn in emu.router.functions.values():
        if "HOOKS_BY_ARRAY" in fn.environment:
            fn.environment["HOOKS_BY_ARRAY"] = json.dumps(CONFIGURED)


def consistency_of(set_id: str) -> set[str]:
    return {tags_of(s)["raidsnap:consistency"] for s in sets_of("db1")[set_id]}


def test_hooks_run_around_the_freeze_and_the_set_says_application(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3)
    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze", "hooks": HOOKS})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert consistency_of(run.output["setId"]) == {"application"}
    log = [e for e in emu.hosts.state(fx.instance_id).log if "snapshot" in e or "freeze" in e]
    assert log == [
        "pre-snapshot /usr/local/sbin/db-hook --hold",
        "freeze /data",
        "post-snapshot /usr/local/sbin/db-hook --release",
    ]


def test_hooks_alone_with_crash_consistency_freeze_nothing(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3)
    run = emu.run("backup", {"array": "db1", "hooks": HOOKS})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert consistency_of(run.output["setId"]) == {"application"}
    log = emu.hosts.state(fx.instance_id).log
    assert "pre-snapshot /usr/local/sbin/db-hook --hold" in log
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


# Who may start a backup may not thereby run a command of their choosing as root on the
# instance: a run names hooks, the configuration (deployed with the stack) holds the commands.
CHANGES = {
    ("ec2", "CreateSnapshots"),
    ("ec2", "CreateTags"),
    ("ssm", "SendCommand"),
    ("dynamodb", "UpdateItem"),
    ("dynamodb", "PutItem"),
}


@pytest.mark.parametrize(
    ("hooks", "shown"),
    [
        ({"preSnapshot": "/usr/local/sbin/db-hook --release"}, "'/usr/local/sbin/db-hook"),
        ({"preSnapshot": "/bin/true", "postSnapshot": "release"}, "'/bin/true'"),
        ({"postSnapshot": "/usr/bin/id"}, "'/usr/bin/id'"),
        ({"preSnapshot": "flush"}, "'flush'"),
    ],
)
def test_a_run_that_gives_a_command_or_an_unknown_name_fails_early_and_changes_nothing(
    emu: Emulation, hooks: dict[str, str], shown: str
) -> None:
    fx = make_array(emu.hosts, "db1", 3)
    mark = len(emu.double.calls)

    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze", "hooks": hooks})

    assert (run.status, run.error) == ("FAILED", "InvalidInput"), run.cause
    cause = run.cause or ""
    assert cause.startswith("hooks."), cause
    assert shown in cause and "arrays.db1.hooks.commands (hold, release)" in cause, cause
    made = [
        (c.service, c.operation)
        for c in emu.double.calls[mark:]
        if c.applied and (c.service, c.operation) in CHANGES
    ]
    assert made == []
    assert sets_of("db1") == {}
    assert emu.hosts.state(fx.instance_id).log == []


def test_a_post_hook_that_fails_in_thaw_fails_the_backup_and_the_set_is_not_application(
    emu: Emulation,
) -> None:
    # GIVEN a backup whose pre hook held the application, WHEN the post hook fails in thaw
    # (after the filesystem is thawed), THEN the run fails HookFailed, the set it took stays
    # (its snapshots are kept) but no longer claims the application's help: the hold through the
    # snapshot instant was never confirmed.
    fx = make_array(emu.hosts, "db1", 3)
    line = {
        "ok": False,
        "error": "HookFailed",
        "message": "/data is thawed, but the post-snapshot hook failed (exit 3)",
    }
    emu.hosts.fail_next(
        "thaw", CommandOutcome(status="Failed", stdout=json.dumps(line), exit_code=1)
    )
    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze", "hooks": HOOKS})
    assert (run.status, run.error) == ("FAILED", "HookFailed"), run.cause
    cause = run.cause or ""
    assert "post-snapshot hook failed (exit 3)" in cause
    (set_id,) = sets_of("db1")
    assert set_id in cause and "fsfreeze" in cause, cause
    assert consistency_of(set_id) == {"fsfreeze"}
    assert "/data" not in emu.hosts.state(fx.instance_id).frozen


def test_a_post_hook_without_a_pre_hook_is_refused_and_changes_nothing(emu: Emulation) -> None:
    # It would never run (a post hook is owed once a pre hook started), and nothing held the
    # application at the snapshot instant: the run is refused by the field's name.
    fx = make_array(emu.hosts, "db1", 3)
    post_only = {"postSnapshot": "release"}
    for consistency in ("fsfreeze", "crash"):
        run = emu.run("backup", {"array": "db1", "consistency": consistency, "hooks": post_only})
        assert (run.status, run.error) == ("FAILED", "InvalidInput"), run.cause
        assert (run.cause or "").startswith("hooks.postSnapshot: "), run.cause
    assert sets_of("db1") == {}
    assert emu.hosts.state(fx.instance_id).log == []
