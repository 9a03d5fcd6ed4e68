"""Application hooks of a backup that takes several arrays at one point in time (takeWith): the
one array of the group with hooks runs them as a backup of it alone would (its pre hook before
any freeze, its post hook once every other array is thawed, HookFailed, the post hook always
run), each set labelled with what it got; a group with hooks on two arrays is refused."""

from __future__ import annotations

import json

import pytest
from test_backup_together import create_snapshots, freezes_and_thaws, two

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import HeldStep, sets_of, tags_of

HOLD = "/usr/local/sbin/db-hook --hold"
RELEASE = "/usr/local/sbin/db-hook --release"
# db1's commands (a run may name them), logs' hooks (its backups run them by default).
CONFIGURED = {
    "db1": {"timeoutSeconds": 30, "commands": {"hold": HOLD, "release": RELEASE}},
    "logs": {"timeoutSeconds": 20, "preSnapshot": HOLD, "postSnapshot": RELEASE},
}


def configure(emu: Emulation, hooks: dict[str, object]) -> None:
    """The arrays' hooks as arrays.<name>.hooks in a config file sets them."""
    for fn in emu.router.functions.values():
        if "HOOKS_BY_ARRAY" in fn.environment:
            fn.environment["HOOKS_BY_ARRAY"] = json.dumps(hooks)


@pytest.fixture(autouse=True)
def configured_hooks(emu: Emulation) -> None:
    configure(emu, CONFIGURED)


def labels(array: str, set_id: str) -> set[str]:
    return {tags_of(s)["raidsnap:consistency"] for s in sets_of(array)[set_id]}


def hook_log(emu: Emulation, instance_id: str) -> list[str]:
    return [e for e in emu.hosts.state(instance_id).log if "snapshot" in e or "freeze" in e]


def test_the_hooked_array_runs_its_pre_hook_first_and_its_post_hook_last(
    emu: Emulation,
) -> None:
    # GIVEN db1 (/data) and logs (/logs), logs configured with hooks
    fx, _, _ = two(emu)
    # WHEN db1 is backed up with logs, fsfreeze-consistent
    run = emu.run("backup", {"array": "db1", "takeWith": ["logs"], "consistency": "fsfreeze"})
    # THEN logs' pre hook runs before any freeze, and its post hook after every thaw
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert hook_log(emu, fx.instance_id) == [
        f"pre-snapshot {HOLD}",
        "freeze /logs",
        "freeze /data",
        f"post-snapshot {RELEASE}",
    ]
    assert freezes_and_thaws(emu) == [
        ("raidsnap-freeze", "/logs"),
        ("raidsnap-freeze", "/data"),
        ("CreateSnapshots", ""),
        ("raidsnap-thaw", "/data"),
        ("raidsnap-thaw", "/logs"),
    ]
    # AND only the documents of logs carry its hooks
    sent = [
        (c.params["DocumentName"], c.params["Parameters"])
        for c in emu.double.calls
        if c.applied and c.params.get("DocumentName") in ("raidsnap-freeze", "raidsnap-thaw")
    ]
    for document, params in sent:
        hooked = params["MountPoint"] == ["/logs"]
        assert params.get("PostSnapshot", [""]) == ([RELEASE] if hooked else [""]), document
        if document == "raidsnap-freeze":
            assert params.get("PreSnapshot", [""]) == ([HOLD] if hooked else [""])
    # AND logs' set says application, db1's fsfreeze
    (part,) = run.output["together"]
    assert (run.output["consistency"], part["consistency"]) == ("fsfreeze", "application")
    assert labels("logs", part["setId"]) == {"application"}
    assert labels("db1", run.output["setId"]) == {"fsfreeze"}
    host = emu.hosts.state(fx.instance_id)
    assert (host.frozen, host.guards, host.hooks_owed) == (set(), {}, {})


def test_hooks_of_the_array_started_for_run_with_crash_consistency_alone(
    emu: Emulation,
) -> None:
    # GIVEN db1's hooks named by the run (logs has none), crash consistency: nothing is frozen
    fx, _, _ = two(emu)
    configure(emu, {"db1": CONFIGURED["db1"]})
    run = emu.run(
        "backup",
        {
            "array": "db1",
            "takeWith": ["logs"],
            "hooks": {"preSnapshot": "hold", "postSnapshot": "release"},
        },
    )
    # THEN db1's hooks ran around the one call (the freeze document with Freeze=false)
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert hook_log(emu, fx.instance_id) == [f"pre-snapshot {HOLD}", f"post-snapshot {RELEASE}"]
    assert freezes_and_thaws(emu) == [
        ("raidsnap-freeze", "/data"),
        ("CreateSnapshots", ""),
        ("raidsnap-thaw", "/data"),
    ]
    (part,) = run.output["together"]
    assert (run.output["consistency"], part["consistency"]) == ("application", "crash")


def test_a_pre_hook_that_fails_fails_the_run_by_name_takes_nothing_and_thaws_all(
    emu: Emulation,
) -> None:
    # GIVEN logs' pre hook fails (freeze.sh runs its post hook and reports HookFailed)
    fx, _, _ = two(emu)
    line = {
        "ok": False,
        "error": "HookFailed",
        "message": "the pre-snapshot hook failed (exit 2); /logs was not frozen; "
        "post-snapshot hook: ok",
    }
    emu.hosts.fail_next(
        "freeze", CommandOutcome(status="Failed", stdout=json.dumps(line), exit_code=1)
    )
    # WHEN db1 is backed up with logs
    run = emu.run("backup", {"array": "db1", "takeWith": ["logs"], "consistency": "fsfreeze"})
    # THEN the run fails HookFailed before /data was frozen, and takes nothing
    assert (run.status, run.error) == ("FAILED", "HookFailed"), run.cause
    assert "pre-snapshot hook failed" in str(run.cause)
    assert not create_snapshots(emu)
    assert ("raidsnap-freeze", "/data") not in freezes_and_thaws(emu)
    host = emu.hosts.state(fx.instance_id)
    assert (host.frozen, host.guards) == (set(), {})


def test_a_post_hook_that_fails_fails_the_run_and_lowers_its_arrays_label_only(
    emu: Emulation,
) -> None:
    # GIVEN logs' post hook fails in its thaw (the last: /data is thawed before it)
    fx, _, _ = two(emu)
    line = {
        "ok": False,
        "error": "HookFailed",
        "message": "/logs is thawed, but the post-snapshot hook failed (exit 3)",
    }
    second_thaw = HeldStep(emu, "backup_thaw", nth=2)
    # WHEN db1 is backed up with logs, fsfreeze-consistent
    arn = emu.start("backup", {"array": "db1", "takeWith": ["logs"], "consistency": "fsfreeze"})
    second_thaw.wait()
    emu.hosts.fail_next(
        "thaw", CommandOutcome(status="Failed", stdout=json.dumps(line), exit_code=1)
    )
    second_thaw.release()
    run = emu.wait(arn)
    # THEN the run fails HookFailed; both sets are kept, logs' labelled fsfreeze, not
    # application, and db1's as it was
    assert (run.status, run.error) == ("FAILED", "HookFailed"), run.cause
    assert "post-snapshot hook failed (exit 3)" in str(run.cause)
    assert set(sets_of("db1")) and set(sets_of("logs"))
    (logs_set,) = sets_of("logs")
    (db1_set,) = sets_of("db1")
    assert logs_set in str(run.cause) and "fsfreeze" in str(run.cause)
    assert labels("logs", logs_set) == {"fsfreeze"}
    assert labels("db1", db1_set) == {"fsfreeze"}
    host = emu.hosts.state(fx.instance_id)
    assert (host.frozen, host.guards) == (set(), {})


def test_hooks_on_two_arrays_of_a_group_are_refused_before_anything_changes(
    emu: Emulation,
) -> None:
    fx, _, _ = two(emu)
    mark = len(emu.double.calls)
    run = emu.run(
        "backup",
        {"array": "db1", "takeWith": ["logs"], "hooks": {"preSnapshot": "hold"}},
    )
    assert (run.status, run.error) == ("FAILED", "InvalidInput"), run.cause
    cause = str(run.cause)
    assert cause.startswith("takeWith: ") and "db1 and logs" in cause, cause
    later = emu.double.calls[mark:]
    assert not [c for c in later if c.operation == "SendCommand"]
    assert not create_snapshots(emu)
    assert emu.hosts.state(fx.instance_id).log == []
