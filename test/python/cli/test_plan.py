"""A restore's plan before it starts: what `raidsnap restore` and `raidsnap recover` show, ask
and refuse, on the emulation. The plan is Prepare's own (workflows.restore.prepare.preview, with
the deployed Prepare function's settings) and computing it changes nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_runner import Cli, Watch, line_of, on_terminal, plain

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import ArrayFixture, make_array, make_old_set

SET_ID = re.compile(r"db1-\d{8}T\d{6}Z-[0-9a-f]{8}")


@pytest.fixture
def cli(template: Path) -> Cli:
    return Cli(template)


def started(watch: Watch) -> list[str]:
    return [c.service + ":" + c.operation for c in watch.calls() if c.operation == "StartExecution"]


def test_replace_on_a_terminal_shows_the_plan_then_asks_then_starts(cli: Cli) -> None:
    watch = Watch()

    result = cli(
        "restore", "db1", "--mode", "replace", "--emulation", "--seed-backups", "1",
        prepare=watch, terminal=True, input="y\n",
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    out = result.output
    assert watch.fx is not None
    fx = watch.fx
    # the plan: the set, its age and consistency
    assert (
        "PLAN" in out and "restore db1 · mode replace" in out and "nothing has changed yet" in out
    )
    set_line = line_of(out, "   set  ")
    planned = SET_ID.search(set_line)
    assert planned, set_line
    assert re.search(r"taken \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(\d+m( \d+s)? ago\)", out)
    assert "complete · crash-consistent · 3 members" in out
    # where, what is released and kept, what is created
    assert f"{fx.instance_id} (db1) in {fx.availability_zone}" in line_of(out, "    target  ")
    assert "the array /dev/md0 mounted at /data" in line_of(out, "   release  ")
    detach = line_of(out, "    detach  ")
    for volume in fx.member_ids:
        assert volume in detach
    assert "detached and KEPT, tagged raidsnap:replaced-by (nothing is deleted)" in line_of(
        out, "as the release finds the members on the instance"
    )
    for volume in fx.other_volume_ids:
        assert volume in line_of(out, "untouched")
    assert "3 x gp3 32 GiB" in line_of(out, "    create  ")
    # the initialization auto chose, with its estimate, and the others it weighed
    assert re.search(
        r"initialize\s+prewarm, chosen by auto: mounted in about \d+ s, full performance in "
        r"about \d+ min",
        out,
    )
    assert "the others: rate at 300 MiB/s" in out
    # then the question, and only then the run, of the set that was shown
    assert out.index("PLAN") < out.index("Start this restore of db1? [y/N]") < out.index("started")
    assert f"setId {planned.group(0)}" in line_of(out, "started restore")
    assert "SUCCEEDED restore" in out


def test_answering_no_starts_nothing(cli: Cli) -> None:
    watch = Watch()

    result = cli(
        "restore", "db1", "--mode", "replace", "--emulation", "--seed-backups", "1",
        prepare=watch, terminal=True, input="n\n",
    )  # fmt: skip

    assert result.exit_code == 1, result.output
    assert "nothing started" in result.output
    assert watch.changes() == []


def test_dry_run_prints_the_plan_and_changes_nothing_anywhere(cli: Cli) -> None:
    watch = Watch()

    result = cli("recover", "db1", "--dry-run", "--emulation", "--seed-backups", "1", prepare=watch)

    assert result.exit_code == 0, result.output
    assert "restore db1 · mode replace" in result.stdout
    assert "dry run: nothing was started" in result.stdout
    # not a lock taken, not a move recorded, not a command sent, not an execution started
    assert watch.changes() == []
    reads = {c.operation for c in watch.calls()}
    assert "GetFunctionConfiguration" in reads  # the deployed Prepare's settings were read


def test_without_a_terminal_a_restore_refuses_until_yes_and_builds_nothing(cli: Cli) -> None:
    def must_not_be_built(emu: Emulation, fx: ArrayFixture) -> None:
        raise AssertionError("a refused command built the emulation")

    result = cli("restore", "db1", "--mode", "replace", "--emulation", prepare=must_not_be_built)

    assert result.exit_code == 2, result.output
    said = plain(result.output)
    assert "Invalid value for '--yes'" in said
    assert "stdin is not a terminal" in said
    assert "--dry-run" in said


def test_yes_starts_without_asking(cli: Cli) -> None:
    result = cli("recover", "db1", "--yes", "--emulation", "--seed-backups", "1")

    assert result.exit_code == 0, result.output
    assert "Start this restore" not in result.output
    assert result.output.index("PLAN") < result.output.index("started restore db1 (mode replace")


def test_the_plan_takes_the_initialization_the_deployed_function_is_configured_with(
    cli: Cli,
) -> None:
    def configured(emu: Emulation, fx: ArrayFixture) -> None:
        del fx
        assert emu.router is not None
        for fn in emu.router.functions.values():
            if fn.handler.endswith(".restore_prepare.handler"):
                fn.environment["INITIALIZATION_BY_ARRAY"] = json.dumps({"db1": "none"})

    result = cli(
        "recover", "db1", "--dry-run", "--emulation", "--seed-backups", "1", prepare=configured
    )

    assert result.exit_code == 0, result.output
    assert re.search(r"initialize\s+none: blocks load from the snapshots", result.stdout)


def test_an_unknown_array_is_refused_listing_the_arrays_that_exist(cli: Cli) -> None:
    watch = Watch()

    result = cli("restore", "db2", "--yes", "--emulation", "--seed-backups", "1", prepare=watch)

    assert result.exit_code == 1, result.output
    assert "refused: SnapshotSetNotFound: array db2 has no complete snapshot set" in result.output
    assert "nothing was started" in result.output
    assert "arrays here:" in result.output
    listed = line_of(result.output, "  db1: ")
    assert re.search(r"db1: 1 set, latest db1-\d{8}T\d{6}Z-[0-9a-f]{8} \(.+ old\); on i-", listed)
    assert started(watch) == []
    assert watch.changes() == []


def test_an_unknown_set_is_refused_listing_the_arrays_sets(cli: Cli) -> None:
    def sets(emu: Emulation, fx: ArrayFixture) -> None:
        make_old_set(emu.hosts, fx, "db1-older")
        make_old_set(emu.hosts, fx, "db1-newer")

    watch = Watch(sets)

    result = cli("restore", "db1", "--set", "db1-nope", "--yes", "--emulation", prepare=watch)

    assert result.exit_code == 1, result.output
    assert "refused: SnapshotSetNotFound: no snapshot set db1-nope of array db1" in result.output
    assert "sets of db1, newest first:" in result.output
    assert "complete · latest" in line_of(result.output, "db1-newer")
    assert result.output.index("db1-newer") < result.output.index("db1-older")
    assert started(watch) == []


def test_a_target_that_does_not_exist_is_a_usage_error_naming_target(cli: Cli) -> None:
    result = cli(
        "restore", "db1", "--target", "i-0123456789abcdef0", "--yes", "--emulation",
        "--seed-backups", "1",
    )  # fmt: skip

    assert result.exit_code == 2, result.output
    said = plain(result.output)
    assert "Invalid value for '--target'" in said
    assert "instance i-0123456789abcdef0 does not exist in this region" in said


def test_a_second_array_is_listed_with_where_it_lives(cli: Cli) -> None:
    def two(emu: Emulation, fx: ArrayFixture) -> None:
        del fx
        logs = make_array(emu.hosts, "logs", 2)
        make_old_set(emu.hosts, logs, "logs-only")

    result = cli("restore", "nope", "--yes", "--emulation", prepare=two)

    assert result.exit_code == 1, result.output
    assert re.search(r"  db1: no sets yet; on i-[0-9a-f]+", result.output)
    assert re.search(r"  logs: 1 set, latest logs-only \(.+ old\); on i-[0-9a-f]+", result.output)


def test_on_a_real_terminal_the_plan_is_asked_about_then_the_run_is_shown_live() -> None:
    # GIVEN an operator at a terminal, WHEN they restore db1 in replace mode and answer y
    code, screen = on_terminal(
        ["restore", "db1", "--mode", "replace", "--emulation", "--seed-backups", "1"], "y"
    )

    # THEN they saw the plan, were asked, and followed the run to its end in words
    assert code == 0, screen
    flat = " ".join(screen.split())
    assert flat.index("PLAN") < flat.index("Start this restore of db1? [y/N]")
    assert "KEPT, tagged raidsnap:replaced-by" in flat
    for label in ("run", "status", "now", "so far"):
        assert f"\n{label} " in screen, label
    assert "ARRAY MOUNTED at /data — usable now" in flat
    assert "SUCCEEDED restore restore-db1-" in flat
    assert "FollowOldMembers" not in flat and "StateEntered" not in flat


def test_on_a_real_terminal_no_starts_nothing() -> None:
    code, screen = on_terminal(["recover", "db1", "--emulation", "--seed-backups", "1"], "n")

    assert code == 1, screen
    assert "Start this restore of db1? [y/N]" in screen
    assert "nothing started" in screen
    assert "started restore" not in screen
