"""Review of issue 24 (application hooks) on the emulation: what a run may name, and the label
a set gets."""

from __future__ import annotations

import json

import pytest

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import make_array, sets_of, tags_of

CONFIGURED = {"db1": {"timeoutSeconds": 30, "commands": {"release": "/usr/local/sbin/db-hook"}}}


@pytest.fixture(autouse=True)
def configured_hooks(emu: Emulation) -> None:
    for fn in emu.router.functions.values():
        if "HOOKS_BY_ARRAY" in fn.environment:
            fn.environment["HOOKS_BY_ARRAY"] = json.dumps(CONFIGURED)


def consistency_of(set_id: str) -> set[str]:
    return {tags_of(s)["raidsnap:consistency"] for s in sets_of("db1")[set_id]}


@pytest.mark.parametrize("held", ["builtin:mysql-lock", "builtin:postgresql-backup"])
def test_a_held_ready_made_pre_hook_is_always_let_go(emu: Emulation, held: str) -> None:
    """builtin:mysql-lock and builtin:postgresql-backup hold a session that only their own post
    phase ends (ssm/scripts/lib/hooks.sh, raidsnap_held_session). A run that names the pre hook
    alone (HooksChoice: "a hook not given does not run") succeeds, and nothing ever sends the
    post phase: FLUSH TABLES WITH READ LOCK stays held, the database takes no writes, for the
    hour the holder waits (test/python/unit/test_review_hooks_scripts.py shows it on the real
    scripts). Either the run is refused before anything runs, or the post phase runs."""
    fx = make_array(emu.hosts, "db1", 3)
    run = emu.run(
        "backup", {"array": "db1", "consistency": "fsfreeze", "hooks": {"preSnapshot": held}}
    )
    log = emu.hosts.state(fx.instance_id).log
    if run.status == "FAILED":
        assert run.error == "InvalidInput", run.cause
        assert log == []
    else:
        assert f"post-snapshot {held}" in log, (run.status, log)


def test_a_checkpoint_alone_does_not_make_the_set_application(emu: Emulation) -> None:
    """builtin:postgresql-checkpoint holds nothing ("Nothing is held, so post does nothing",
    lib/hooks.sh; issue 24: "CHECKPOINT for crash consistency"): the set it precedes is what the
    filesystem got, yet it is labelled application, and the issue asks that the label "never
    [say] more than it got"."""
    make_array(emu.hosts, "db1", 3)
    hooks = {"preSnapshot": "builtin:postgresql-checkpoint"}
    run = emu.run("backup", {"array": "db1", "hooks": hooks})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert consistency_of(run.output["setId"]) == {"crash"}
    run = emu.run("backup", {"array": "db1", "consistency": "fsfreeze", "hooks": hooks})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert consistency_of(run.output["setId"]) == {"fsfreeze"}
