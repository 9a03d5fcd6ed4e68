"""What runs for an array (`status ARRAY`: a recovery with its nested restore), stopping it
(`cancel`), and a drill started by hand (`drill`), on the emulation."""

from __future__ import annotations

import json
import re
from pathlib import Path

import boto3
import pytest
from cli_runner import Cli, Watch, hold_in_step, json_of, line_of, plain

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    ArrayFixture,
    alarm_event,
    backed_up,
    launch_instance,
)


@pytest.fixture
def cli(template: Path) -> Cli:
    return Cli(template)


def recovering(emu: Emulation, fx: ArrayFixture) -> None:
    """A recovery of db1 whose restore is assembling the array (held there while the command
    runs): both run."""
    backed_up(emu.hosts, emu.run, fx)
    reached = hold_in_step(emu, "restore_command", "assemble")
    emu.hosts.lose_member(fx.instance_id, fx.member_ids[1])
    started = emu.invoke("recovery_start", alarm_event(fx.instance_id))
    assert started.result and started.result.get("started"), started.result
    assert reached.wait(60), "the restore never reached its assemble"


def test_status_of_an_array_shows_its_running_recovery_with_the_nested_restore(cli: Cli) -> None:
    result = cli("status", "db1", "--emulation", prepare=recovering)

    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "array db1" in out
    recovery = line_of(out, "recovery alarm-")
    assert "RUNNING" in recovery
    assert "restoring the newest complete set" in recovery
    restore = line_of(out, "└ restore alarm-")
    name = re.search(r"recovery (alarm-\S+)", recovery)
    assert name and f"restore {name.group(1)}-restore · RUNNING" in restore
    assert "assembling the array and mounting it" in restore
    # and the recent runs of db1 below
    assert "last " in out and "runs of db1" in out


def test_status_of_the_recovery_shows_its_steps_and_its_restore(cli: Cli) -> None:
    # The recovery's name comes from the alarm's event: every emulation built for a command
    # names it the same.
    listed = cli("status", "db1", "--json", "--emulation", prepare=recovering)
    body = json_of(listed.stdout)
    (recovery,) = [r for r in body["running"] if r["workflow"] == "recovery"]
    (restore,) = [r for r in body["running"] if r["workflow"] == "restore"]
    assert restore["execution"] == recovery["execution"] + "-restore"
    assert restore["now"] == "assembling the array and mounting it"

    result = cli("status", recovery["execution"], "--emulation", prepare=recovering)

    assert result.exit_code == 0, result.output
    out = result.stdout
    assert re.search(r"status\s+RUNNING · restoring the newest complete set", out)
    assert re.search(r"steps\s+\d\d:\d\d:\d\d\s+\+0s\s+looking for evidence", out)
    runs = line_of(out, "runs ")
    assert f"restore {recovery['execution']}-restore · RUNNING" in runs
    assert "assembling the array and mounting it" in runs


def test_an_unknown_name_for_status_lists_the_arrays(cli: Cli) -> None:
    result = cli("status", "db7", "--emulation", "--seed-backups", "1")

    assert result.exit_code == 1, result.output
    said = plain(result.output)
    assert "no execution named 'db7'" in said
    assert "no array db7 here" in said
    assert re.search(r"arrays here: db1: 1 set, latest db1-", said)


def test_cancel_of_an_array_stops_the_restore_its_recovery_runs_after_saying_what_stays(
    cli: Cli,
) -> None:
    watch = Watch(recovering)

    result = cli("cancel", "db1", "--emulation", prepare=watch, terminal=True, input="y\n")

    assert result.exit_code == 0, result.output
    out = result.output
    assert re.search(r"stop restore alarm-\S+-restore \(array db1, now: assembling", out)
    # it was past the release: a stop does not put the old array back, and says so
    said = plain(out)
    warning = said[said.index("WARNING") :]
    assert "does NOT put it back" in warning and "raidsnap:replaced-by" in warning
    assert "Stop restore alarm-" in out
    stops = [c for c in watch.calls() if c.operation == "StopExecution" and c.actor is None]
    assert len(stops) == 1
    assert stops[0].params["executionArn"].split(":")[-1].endswith("-restore")
    assert re.search(r"stopped restore alarm-\S+-restore", result.stdout)


def test_cancel_answered_no_stops_nothing(cli: Cli) -> None:
    watch = Watch(recovering)

    result = cli("cancel", "db1", "--emulation", prepare=watch, terminal=True, input="n\n")

    assert result.exit_code == 1, result.output
    assert "nothing stopped" in result.output
    assert [c for c in watch.calls() if c.operation == "StopExecution" and c.actor is None] == []


def test_cancel_of_an_array_with_nothing_running_says_so(cli: Cli) -> None:
    result = cli("cancel", "db1", "--yes", "--emulation", "--seed-backups", "1")

    assert result.exit_code == 1, result.output
    assert "no restore, recovery or drill of an array 'db1' runs now" in plain(result.output)


def drill_host(emu: Emulation, fx: ArrayFixture) -> str:
    del emu
    host = launch_instance("db1-drill", fx.availability_zone, tag_array=False)
    boto3.client("ec2").create_tags(
        Resources=[host], Tags=[{"Key": "raidsnap:array", "Value": "db1-drill"}]
    )
    return host


def test_drill_with_a_target_starts_the_drill_workflow_onto_it(cli: Cli) -> None:
    result = cli(
        "drill", "db1", "--target", "i-0000000000000000", "--emulation", "--seed-backups", "1"
    )

    assert result.exit_code == 1, result.output
    assert "started drill db1 (targetInstanceId i-0000000000000000, trigger manual)" in (
        result.output
    )
    assert "FAILED drill" in result.output
    assert "instance i-0000000000000000 does not exist" in plain(result.output)


def test_drill_without_a_target_starts_the_scheduled_drill_as_its_schedule_would(
    cli: Cli,
) -> None:
    def scheduled(emu: Emulation, fx: ArrayFixture) -> None:
        host = drill_host(emu, fx)
        boto3.client("scheduler").create_schedule(
            Name="db1-drill",
            ScheduleExpression="cron(0 3 ? * SUN *)",
            FlexibleTimeWindow={"Mode": "OFF"},
            Target={
                "Arn": emu.state_machines["drill"],
                "RoleArn": "arn:aws:iam::123456789012:role/raidsnap-drill-schedule",
                "Input": json.dumps(
                    {
                        "array": "db1",
                        "targetInstanceId": host,
                        "mountPoint": "/mnt/raidsnap-drill",
                        "mdDevice": "/dev/md100",
                        "initialization": "none",
                        "trigger": "schedule",
                    }
                ),
            },
        )

    result = cli("drill", "db1", "--emulation", "--seed-backups", "1", prepare=scheduled)

    assert result.exit_code == 0, result.output
    started = line_of(result.output, "started drill")
    assert re.search(r"targetInstanceId i-[0-9a-f]+", started)
    assert "trigger manual" in started
    assert "restoring a read-only copy onto the drill instance" in result.output
    assert "SUCCEEDED drill" in result.output


def test_drill_without_a_target_or_a_schedule_asks_for_the_target(cli: Cli) -> None:
    result = cli("drill", "db1", "--emulation", "--seed-backups", "1")

    assert result.exit_code == 1, result.output
    said = plain(result.output)
    assert "db1 has no drill schedule" in said and "--target" in said
