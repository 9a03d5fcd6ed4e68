"""The raidsnap command, end to end on the emulation: what an operator sees and the exit codes
scripts rely on (0 success, 1 failed, 2 bad usage, 3 timed out or aborted)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from cli_runner import Cli, line_of, plain
from typer.testing import CliRunner

from raidsnap_cli.app import app
from raidsnap_emulation.double import AwsError, CommandOutcome
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    ArrayFixture,
    configure_fast_restore,
    make_array,
    make_old_set,
    record_set,
    sets_of,
)

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def cli(template: Path) -> Cli:
    return Cli(template)


def take_pending_set(fx: ArrayFixture, set_id: str) -> None:
    """A set whose snapshots were just started: the clock does not move, so they stay pending."""
    ec2 = boto3.client("ec2")
    spec: Any = {
        "ResourceType": "snapshot",
        "Tags": [
            {"Key": "raidsnap:array", "Value": fx.name},
            {"Key": "raidsnap:set-id", "Value": set_id},
            {"Key": "raidsnap:member-count", "Value": str(len(fx.member_ids))},
        ],
    }
    taken = ec2.create_snapshots(
        InstanceSpecification={
            "InstanceId": fx.instance_id,
            "ExcludeBootVolume": True,
            "ExcludeDataVolumeIds": fx.other_volume_ids,
        },
        TagSpecifications=[spec],
    )["Snapshots"]
    # A running backup has recorded the set's snapshots already.
    record_set(
        fx,
        set_id,
        {fx.member_ids.index(s["VolumeId"]): s["SnapshotId"] for s in taken},
        min(s["StartTime"] for s in taken),
    )
    for snap in taken:
        index = fx.member_ids.index(snap["VolumeId"])
        ec2.create_tags(
            Resources=[snap["SnapshotId"]],
            Tags=[{"Key": "raidsnap:member-index", "Value": str(index)}],
        )


# ---------------------------------------------------------------------- sets


def test_sets_shows_complete_incomplete_why_latest_and_age(cli: Cli) -> None:
    def world(emu: Emulation, fx: ArrayFixture) -> None:
        make_old_set(emu.hosts, fx, "db1-a-complete")
        make_old_set(emu.hosts, fx, "db1-b-short", missing_index=1)
        make_old_set(emu.hosts, fx, "db1-c-failed", failing=True)
        make_old_set(emu.hosts, fx, "db1-d-complete")
        # make_old_set lets each set finish: snapshot time + 20 s. Then 3 h 12 m since d began.
        emu.clock.advance(3 * 3600 + 12 * 60 - (emu.double.snapshot_seconds + 20))
        take_pending_set(fx, "db1-e-running")

    result = cli("sets", "--emulation", prepare=world)

    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "array db1" in out
    latest = line_of(out, "db1-d-complete")
    assert "complete · latest" in latest
    assert "3h 12m" in latest
    assert "3/3" in latest
    older = line_of(out, "db1-a-complete")
    assert "complete" in older
    assert "latest" not in older
    assert "missing member 1" in line_of(out, "db1-b-short")
    assert "2/3" in line_of(out, "db1-b-short")
    assert "error (member 2: Snapshot creation failed" in line_of(out, "db1-c-failed")
    assert "pending (0%)" in line_of(out, "db1-e-running")
    assert "0s" in line_of(out, "db1-e-running")
    # newest first
    assert out.index("db1-e-running") < out.index("db1-d-complete") < out.index("db1-a-complete")


def test_sets_finds_every_array_by_tag_and_array_narrows_to_one(cli: Cli) -> None:
    def world(emu: Emulation, fx: ArrayFixture) -> None:
        make_old_set(emu.hosts, fx, "db1-only")
        logs = make_array(emu.hosts, "logs", 2)
        make_old_set(emu.hosts, logs, "logs-only")

    every = cli("sets", "--emulation", prepare=world)
    one = cli("sets", "--emulation", "--array", "logs", prepare=world)

    assert every.exit_code == 0, every.output
    assert "array db1" in every.stdout
    assert "array logs" in every.stdout
    assert "2/2" in line_of(every.stdout, "logs-only")
    assert one.exit_code == 0, one.output
    assert "logs-only" in one.stdout
    assert "db1" not in one.stdout


def test_sets_shows_what_snapshot_locks_hold_and_until_when(cli: Cli) -> None:
    def world(emu: Emulation, fx: ArrayFixture) -> None:
        make_old_set(emu.hosts, fx, "db1-a-governed")
        make_old_set(emu.hosts, fx, "db1-b-compliant")
        make_old_set(emu.hosts, fx, "db1-c-expired")
        make_old_set(emu.hosts, fx, "db1-d-free")
        ec2 = boto3.client("ec2")
        snaps = sets_of(fx.name)
        first = str(snaps["db1-a-governed"][0]["SnapshotId"])
        ec2.lock_snapshot(SnapshotId=first, LockMode="governance", LockDuration=5)
        for snap in snaps["db1-b-compliant"]:
            ec2.lock_snapshot(
                SnapshotId=str(snap["SnapshotId"]), LockMode="compliance", LockDuration=30
            )
        for snap in snaps["db1-c-expired"]:
            ec2.lock_snapshot(
                SnapshotId=str(snap["SnapshotId"]), LockMode="governance", LockDuration=1
            )
        emu.clock.advance(2 * 86400)

    result = cli("sets", "--emulation", prepare=world)

    assert result.exit_code == 0, result.output
    out = result.stdout
    # One of three members locked: the set cannot go whole, and the line says how many hold it.
    governed = line_of(out, "db1-a-governed")
    assert re.search(r"locked \(governance, 1/3 snapshots\) until \d{4}-\d\d-\d\d ", governed)
    assert "locked (compliance, 3/3 snapshots) until" in line_of(out, "db1-b-compliant")
    # An expired lock holds nothing; a set never locked says nothing of locks.
    assert "locked" not in line_of(out, "db1-c-expired")
    assert "locked" not in line_of(out, "db1-d-free")


def test_sets_without_leave_to_read_locks_lists_the_sets_and_says_so(cli: Cli) -> None:
    def world(emu: Emulation, fx: ArrayFixture) -> None:
        make_old_set(emu.hosts, fx, "db1-only")
        emu.double.fail("ec2", "DescribeLockedSnapshots", 5, code="UnauthorizedOperation")

    result = cli("sets", "--emulation", prepare=world)

    assert result.exit_code == 0, result.output
    assert "complete · latest" in line_of(result.stdout, "db1-only")
    assert plain(result.output).count("snapshot locks not shown") == 1
    assert "UnauthorizedOperation (it needs ec2:DescribeLockedSnapshots)" in plain(result.output)


def test_sets_without_any_set_says_so(cli: Cli) -> None:
    result = cli("sets", "--emulation")
    assert result.exit_code == 0, result.output
    assert "no snapshot sets" in result.stdout


# ---------------------------------------------------------------------- backup


def test_backup_follows_the_run_to_succeeded_and_exits_0(cli: Cli) -> None:
    result = cli("backup", "db1", "--emulation", "--consistency", "fsfreeze")

    assert result.exit_code == 0, result.output
    assert "started backup db1 (trigger manual, consistency fsfreeze)" in result.output
    # the progress: steps in the order the run took them, in words
    assert result.output.index("checking the array and its instance") < result.output.index(
        "taking the snapshot set"
    )
    assert "SUCCEEDED backup backup-db1-" in result.stdout
    assert re.search(r"set\s+db1-\d{8}T\d{6}Z-[0-9a-f]{8}", result.stdout)
    assert re.search(r"consistency\s+fsfreeze", result.stdout)
    for index in range(3):
        assert re.search(rf"member {index}\s+snap-[0-9a-f]+\s+\(from vol-", result.stdout)


def test_backup_of_an_array_that_keeps_fsr_says_where_it_is_kept(cli: Cli) -> None:
    def keep(emu: Emulation, fx: ArrayFixture) -> None:
        emu.double.fsr_region_limit = 10
        configure_fast_restore(emu, fx.name, [fx.availability_zone], sets=1)

    result = cli("backup", "db1", "--emulation", prepare=keep)

    assert result.exit_code == 0, result.output
    line = line_of(result.stdout, "fast restore")
    assert re.search(r"kept: FSR kept on db1-\d{8}T\d{6}Z-[0-9a-f]{8} in us-east-1a", line), line


def test_backup_of_an_unknown_array_exits_1_with_error_name_and_cause(cli: Cli) -> None:
    result = cli("backup", "db9", "--emulation")

    assert result.exit_code == 1, result.output
    assert "FAILED backup" in result.output
    assert "ArrayNotFound: no running instance is tagged raidsnap:array=db9" in result.output
    assert "SUCCEEDED" not in result.output


def test_a_backup_of_an_array_whose_name_has_a_dot_starts(cli: Cli) -> None:
    # The workflows log, so an execution name may hold only letters, digits, "-" and "_".
    result = cli("backup", "db.9", "--emulation")

    assert result.exit_code == 1, result.output
    assert "FAILED backup backup-db-9-" in plain(result.output)
    assert "ArrayNotFound: no running instance is tagged raidsnap:array=db.9" in result.output


# ---------------------------------------------------------------------- restore


def test_restore_of_latest_prints_volumes_md_device_and_mount_point(cli: Cli) -> None:
    result = cli(
        "restore", "db1", "--emulation", "--seed-backups", "1", "--mode", "replace", "--yes"
    )

    assert result.exit_code == 0, result.output
    assert re.search(r"started restore db1 \(mode replace, setId db1-\d{8}T", result.output)
    assert "SUCCEEDED restore restore-db1-" in result.stdout
    for index in range(3):
        assert re.search(rf"member {index}\s+vol-[0-9a-f]+ at /dev/sd[a-z]", result.stdout)
    assert re.search(r"md device\s+/dev/md0", result.stdout)
    assert re.search(r"mount point\s+/data", result.stdout)
    assert re.search(r"replaced\s+vol-", result.stdout)


def test_restore_without_a_complete_set_exits_1_with_snapshot_set_not_found(
    cli: Cli,
) -> None:
    result = cli("restore", "db1", "--emulation", "--yes")

    assert result.exit_code == 1, result.output
    assert "SnapshotSetNotFound: array db1 has no complete snapshot set" in result.output
    assert "nothing was started" in result.output


def test_restore_that_is_aborted_exits_3(cli: Cli) -> None:
    def abort_on_first_step(emu: Emulation, fx: ArrayFixture) -> None:
        del fx
        assert emu.router is not None
        router, sfn = emu.router, boto3.client("stepfunctions")

        def invoke(params: dict[str, Any]) -> dict[str, Any]:
            # The run is inside its first Task: an operator presses "Stop execution" now.
            for run in sfn.list_executions(
                stateMachineArn=emu.state_machines["restore"], statusFilter="RUNNING"
            )["executions"]:
                sfn.stop_execution(executionArn=run["executionArn"], error="Operator")
            return router(params)

        emu.double.route("lambda", "Invoke", invoke)

    # (replace: attach mode refuses the array's own instance, which still has its members)
    result = cli(
        "restore",
        "db1",
        "--mode",
        "replace",
        "--emulation",
        "--seed-backups",
        "1",
        "--yes",
        prepare=abort_on_first_step,
    )

    assert result.exit_code == 3, result.output
    assert "ABORTED restore" in result.output


@pytest.mark.parametrize(
    ("args", "option", "message"),
    [
        (["--mode", "swap"], "--mode", "'swap' is not one of 'attach', 'replace'"),
        (
            ["--initialization", "lazy"],
            "--initialization",
            "'lazy' is not one of 'auto', 'fsr', 'rate', 'prewarm', 'none'",
        ),
        (
            ["--volume-type", "gp3", "--iops", "500"],
            "--iops",
            "500 is outside 3000..80000",
        ),
        (
            ["--volume-type", "io2", "--throughput", "500"],
            "--throughput",
            "only gp3 volumes take throughput, not io2",
        ),
        (
            ["--initialization", "prewarm", "--rate", "200"],
            "--rate",
            "is only used with --initialization rate (or auto, which may use it)",
        ),
        (
            ["--initialization", "rate"],
            "--rate",
            "is required with --initialization rate",
        ),
        (
            ["--initialization", "rate", "--rate", "900"],
            "--rate",
            "900 is outside 100..300",
        ),
        (
            ["--target", "web-1"],
            "--target",
            "'web-1' is not an instance id: an instance id is i- followed by 8 to 17",
        ),
        (
            ["--target", "i-123"],
            "--target",
            "'i-123' is not an instance id: an instance id is i- followed by 8 to 17",
        ),
        (["--mount-point", "/"], "--mount-point", "'/' is not a mount point: an absolute path"),
        (["--set", "-bad"], "--set", "'-bad' is not a set id"),
        (["--iops", "many"], "--iops", "should be a valid integer"),
    ],
)
def test_restore_refuses_bad_option_values_with_exit_2_and_starts_nothing(
    cli: Cli, args: list[str], option: str, message: str
) -> None:
    def must_not_be_built(emu: Emulation, fx: ArrayFixture) -> None:
        raise AssertionError("a refused command built the emulation")

    result = cli("restore", "db1", "--emulation", *args, prepare=must_not_be_built)

    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in plain(result.output)
    assert message in plain(result.output)
    # the flags, never the execution input's fields or its patterns
    assert '"initialization"' not in result.output
    assert "[0-9a-f]" not in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["backup", "no spaces"], "'no spaces' is not an array name"),
        (
            ["backup", "db1", "--consistency", "app"],
            "'app' is not one of 'crash', 'fsfreeze'",
        ),
        (["backup", "db1", "--seed-backups", "1"], "add --emulation"),
        (
            ["backup", "db1", "--emulation", "--no-wait"],
            "the emulation ends with this command",
        ),
        (["sets", "--emulation", "--region", "eu-west-1"], "the emulation has none"),
        (["status", "--follow"], "needs an EXECUTION"),
        (["status", "--last", "0"], "greater than or equal to 1"),
    ],
)
def test_bad_usage_exits_2_with_a_clear_message(cli: Cli, args: list[str], message: str) -> None:
    result = cli(*args)
    assert result.exit_code == 2, result.output
    assert message in plain(result.output)


# ---------------------------------------------------------------------- status


def runs_of_both_workflows(emu: Emulation, fx: ArrayFixture) -> None:
    del fx
    restore = {"array": "db1", "mode": "replace"}  # attach mode refuses the array's own host
    assert emu.run("restore", restore, name="restore-after-loss").status == "SUCCEEDED"
    assert emu.run("backup", {"array": "db9"}, name="nightly-db9").status == "FAILED"


def test_status_lists_recent_runs_of_both_workflows_newest_first(cli: Cli) -> None:
    result = cli("status", "--emulation", "--seed-backups", "2", prepare=runs_of_both_workflows)

    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "last 4 runs" in out
    failed = line_of(out, "nightly-db9")
    assert "backup" in failed
    assert "FAILED" in failed
    assert "db9" in failed
    assert "ArrayNotFound" in failed
    restored = line_of(out, "restore-after-loss")
    assert "restore" in restored
    assert "SUCCEEDED" in restored
    assert re.search(r"db1\s+│\s+db1-\d{8}T", restored)
    assert "seed-backup-1" in out
    assert "seed-backup-2" in out
    assert out.index("nightly-db9") < out.index("restore-after-loss")


def two_backups(emu: Emulation, fx: ArrayFixture) -> None:
    del fx
    assert emu.run("backup", {"array": "db1"}, name="nightly-db1").status == "SUCCEEDED"
    assert emu.run("backup", {"array": "db9"}, name="nightly-db9").status == "FAILED"


def test_status_narrows_to_an_array_and_to_the_last_n(cli: Cli) -> None:
    by_array = cli("status", "--emulation", "--array", "db9", prepare=two_backups)
    last_one = cli("status", "--emulation", "--last", "1", prepare=two_backups)

    assert by_array.exit_code == 0, by_array.output
    assert "nightly-db9" in by_array.stdout
    assert "nightly-db1" not in by_array.stdout
    assert last_one.exit_code == 0, last_one.output
    assert "last 1 runs" in last_one.stdout
    assert "nightly-db9" in last_one.stdout
    assert "nightly-db1" not in last_one.stdout


def test_status_of_one_run_shows_input_steps_and_error_in_words(cli: Cli) -> None:
    result = cli("status", "nightly-db9", "--emulation", prepare=two_backups)

    assert result.exit_code == 0, result.output
    assert re.search(r"run\s+backup nightly-db9", result.stdout)
    assert re.search(r"status\s+FAILED", result.stdout)
    assert re.search(r"input\s+db9", result.stdout)
    assert re.search(
        r"steps\s+\d\d:\d\d:\d\d\s+\+0s\s+checking the array and its instance", result.stdout
    )
    assert "ArrayNotFound: no running instance is tagged raidsnap:array=db9" in result.output
    # no state-machine internals, no raw input
    for internal in ("Start →", "Prepare", "LambdaFunction", "states done", '{"array"'):
        assert internal not in result.stdout, internal


def failed_backup(emu: Emulation, fx: ArrayFixture) -> None:
    del fx
    assert emu.run("backup", {"array": "db9"}, name="nightly-db9").status == "FAILED"


def test_status_of_a_run_as_json_is_data(cli: Cli) -> None:
    result = cli("status", "nightly-db9", "--json", "--emulation", prepare=failed_backup)

    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["status"] == "FAILED"
    assert body["input"] == {"array": "db9"}
    assert body["error"] == "ArrayNotFound"
    assert body["steps"][0]["text"] == "checking the array and its instance"


def test_status_of_one_run_shows_its_cost(cli: Cli) -> None:
    entered: list[int] = []

    def backup(emu: Emulation, fx: ArrayFixture) -> None:
        del fx
        run = emu.run("backup", {"array": "db1"}, name="nightly-db1")
        assert run.status == "SUCCEEDED"
        entered.append(run.transitions)

    result = cli("status", "nightly-db1", "--emulation", prepare=backup)

    assert result.exit_code == 0, result.output
    cost = plain(result.stdout)
    # Every state entered is one billed transition, at $0.025 per 1,000 (the price table's).
    assert re.search(rf"cost \$[0-9.e-]+ this run state transitions {entered[0]} ", cost), cost
    assert "a month: snapshot storage added (at most) (3 snapshots" in cost


def test_status_of_a_run_as_json_carries_its_cost(cli: Cli) -> None:
    result = cli("status", "nightly-db1", "--json", "--emulation", prepare=two_backups)

    assert result.exit_code == 0, result.output
    cost = json.loads(result.stdout)["cost"]
    assert cost["lines"][0].endswith(" this run")
    assert [row["item"] for row in cost["monthly"]] == ["snapshot storage added (at most)"]
    assert cost["prices"]["region"] == "us-east-1"


def test_status_prices_a_run_with_the_configs_prices(cli: Cli, tmp_path: Path) -> None:
    config = tmp_path / "raidsnap.yaml"
    config.write_text("prices:\n  transitions1000: 1000\n  snapshotGbMonth: 0\n")
    result = cli(
        "status", "nightly-db1", "--emulation", "--config", str(config), prepare=two_backups
    )

    assert result.exit_code == 0, result.output
    # At $1,000 per 1,000 transitions, a run costs at least $1 per transition.
    cost = plain(result.stdout)
    m = re.search(r"cost \$(\d+\.\d\d) this run state transitions (\d+) ", cost)
    assert m, cost
    assert float(m.group(1)) >= int(m.group(2))
    assert "$0.00 a month: snapshot storage added" in cost


def test_status_of_an_unknown_run_exits_1(cli: Cli) -> None:
    result = cli("status", "no-such-run", "--emulation")
    assert result.exit_code == 1, result.output
    assert "no execution named 'no-such-run'" in result.output


# ---------------------------------------------------------------------- AWS mode, wrapper


def test_without_emulation_sets_come_through_the_default_credential_chain(
    template: Path,
) -> None:
    # GIVEN an account (moto, held by the test) with one complete set
    with Emulation(template) as emu:
        fx = make_array(emu.hosts, "db1", 3)
        make_old_set(emu.hosts, fx, "db1-on-aws")

        # WHEN sets runs without --emulation, as an operator's shell would
        result = Cli(template)("sets", "--region", "us-east-1")

    # THEN it reads the account it was pointed at
    assert result.exit_code == 0, result.output
    assert "complete · latest" in line_of(result.stdout, "db1-on-aws")


def test_on_aws_the_stack_names_the_workflows_and_a_run_left_running_can_be_followed(
    template: Path,
) -> None:
    # GIVEN an account whose CloudFormation stack "raidsnap" holds the workflows
    with Emulation(template) as emu:
        make_array(emu.hosts, "db1", 3)

        def stack_resources(params: dict[str, Any]) -> dict[str, Any]:
            if params["StackName"] != "raidsnap":
                raise AwsError("ValidationError", f"Stack {params['StackName']} does not exist")
            return {
                "StackResourceSummaries": [
                    {"ResourceType": "AWS::IAM::Role", "PhysicalResourceId": "raidsnap-role"}
                ]
                + [
                    {"ResourceType": "AWS::StepFunctions::StateMachine", "PhysicalResourceId": arn}
                    for arn in emu.state_machines.values()
                ]
            }

        emu.double.route("cloudformation", "ListStackResources", stack_resources)
        cli = Cli(template)

        # WHEN a backup is started without waiting, then looked up and followed
        started = cli("backup", "db1", "--no-wait", "--region", "us-east-1")
        arn = started.stdout.strip()
        followed = cli("status", arn, "--follow")
        asked = [
            c.params.get("StackName") for c in emu.double.calls if c.service == "cloudformation"
        ]

    # THEN the stack's resources named the backup workflow, and the run is seen to its end
    assert started.exit_code == 0, started.output
    assert arn.startswith(emu.state_machines["backup"].replace(":stateMachine:", ":execution:"))
    assert "on AWS us-east-1, stack raidsnap" in started.output
    assert "raidsnap" in asked
    assert followed.exit_code == 0, followed.output
    assert "SUCCEEDED backup backup-db1-" in followed.stdout


def test_an_unknown_profile_exits_1_naming_it(cli: Cli) -> None:
    result = cli("sets", "--profile", "no-such-profile")
    assert result.exit_code == 1, result.output
    assert "no-such-profile" in result.output


def test_without_a_region_the_command_says_how_to_give_one(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    result = cli("sets")
    assert result.exit_code == 1, result.output
    assert "no AWS region: pass --region" in result.output


def test_installed_raidsnap_command_runs_from_any_directory(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "raidsnap"), "restore", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stderr
    assert "--initialization" in result.stdout
    assert json.dumps("raidsnap")[1:-1] in result.stdout


def test_emulation_without_its_packages_exits_1_naming_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN an installation without the emulation extra: moto cannot be imported (and nothing
    # of the emulation is imported yet)
    for name in [m for m in sys.modules if m.startswith("raidsnap_emulation.")]:
        monkeypatch.delitem(sys.modules, name)
        monkeypatch.delattr(sys.modules["raidsnap_emulation"], name.split(".")[1], raising=False)
    monkeypatch.setitem(sys.modules, "moto", None)

    # WHEN a command asks for the emulation
    result = CliRunner().invoke(app, ["sets", "--emulation"], env={"COLUMNS": "200"})

    # THEN it says what is missing and what to install, and nothing ran
    assert result.exit_code == 1, result.output
    assert "moto is not installed" in plain(result.output)
    assert "raidsnap-cli[emulation]" in plain(result.output)


def test_escapes_an_instance_prints_reach_the_terminal_as_plain_text(cli: Cli) -> None:
    # GIVEN an instance whose assemble fails printing escape sequences (a colour change and a
    # window-title write) on stderr: the cause carries its stderr tail
    def world(emu: Emulation, fx: ArrayFixture) -> None:
        emu.hosts.fail_next(
            "assemble",
            CommandOutcome(
                status="Failed",
                stdout='{"ok": false, "error": "AssembleFailed", "message": "boom"}',
                stderr="mdadm: \x1b[31mboom\x1b]0;pwned\x07 done",
                exit_code=1,
                duration_seconds=3,
            ),
        )

    run = cli(
        "restore",
        "db1",
        "--emulation",
        "--seed-backups",
        "1",
        "--mode",
        "replace",
        "--yes",
        prepare=world,
    )
    # THEN the cause is shown, without the control characters
    assert run.exit_code == 1, run.output
    assert "\x1b" not in run.output and "\x07" not in run.output
    assert "[31mboom ]0;pwned done" in plain(run.output), run.output
