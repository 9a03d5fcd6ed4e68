"""`raidsnap doctor ARRAY` against the emulation: each check ok, and each way it finds a problem,
by name, with the fix. Exit code 1 when a check of the array found a problem."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from cli_runner import Cli

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    ArrayFixture,
    backed_up,
    launch_instance,
    name_in_config,
)


@pytest.fixture
def cli(template: Path) -> Cli:
    return Cli(template)


def schedule(state: str = "ENABLED", array: str = "db1"):  # type: ignore[no-untyped-def]
    """A backup schedule of ``array``, as the stack deploys one (its target the backup
    workflow, its input the array)."""

    def world(emu: Emulation, fx: ArrayFixture) -> None:
        del fx
        boto3.client("scheduler").create_schedule(
            Name=f"raidsnap-backup-{array}",
            ScheduleExpression="cron(0 */4 * * ? *)",
            FlexibleTimeWindow={"Mode": "OFF"},
            State=state,
            Target={
                "Arn": emu.state_machines["backup"],
                "RoleArn": "arn:aws:iam::123456789012:role/raidsnap-schedule",
                "Input": json.dumps({"array": array, "trigger": "schedule"}),
            },
        )

    return world


def healthy(emu: Emulation, fx: ArrayFixture) -> None:
    backed_up(emu.hosts, emu.run, fx)
    schedule()(emu, fx)


def with_(*steps):  # type: ignore[no-untyped-def]
    def world(emu: Emulation, fx: ArrayFixture) -> None:
        for step in steps:
            step(emu, fx)

    return world


def finding(output: str, check: str) -> str:
    """The line of one check: its verdict in the first column, the check in the second."""
    lines = [ln for ln in output.splitlines() if ln[12:23].strip() == check]
    assert len(lines) == 1, f"{check!r} in {len(lines)} lines of:\n{output}"
    return lines[0]


def test_doctor_of_a_healthy_array_says_ok_for_every_check_and_exits_0(cli: Cli) -> None:
    result = cli("doctor", "db1", "--emulation", prepare=healthy)

    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "tag protection:" in out
    assert finding(out, "tag").startswith("ok ")
    assert "carries raidsnap:array=db1 and runs in us-east-1a" in finding(out, "tag")
    assert "is online, version 3.3." in finding(out, "agent")
    members = finding(out, "members")
    assert members.startswith("ok ") and "3 members recorded on set db1-" in members
    assert "found by on-instance discovery" in members
    assert finding(out, "instances").startswith("ok ")
    assert "0 of 5 snapshots have FSR on in this Region: room for 5" in finding(out, "fsr quota")
    assert "raidsnap-backup-db1 (cron(0 */4 * * ? *)), enabled" in finding(out, "schedule")
    assert "PROBLEM" not in out and "Traceback" not in out


def untag(emu: Emulation, fx: ArrayFixture) -> None:
    del emu
    boto3.client("ec2").delete_tags(Resources=[fx.instance_id], Tags=[{"Key": "raidsnap:array"}])


def second_holder(emu: Emulation, fx: ArrayFixture) -> None:
    del emu
    launch_instance("db1", fx.availability_zone)  # tagged raidsnap:array=db1 too


def moved_tag(emu: Emulation, fx: ArrayFixture) -> None:
    del emu
    untag(None, fx)  # type: ignore[arg-type]
    launch_instance("db1", fx.availability_zone)


def stopped(emu: Emulation, fx: ArrayFixture) -> None:
    del emu
    boto3.client("ec2").stop_instances(InstanceIds=[fx.instance_id])


def agent_offline(emu: Emulation, fx: ArrayFixture) -> None:
    emu.double.set_agent(fx.instance_id, online=False)


def agent_old(emu: Emulation, fx: ArrayFixture) -> None:
    emu.double.set_agent(fx.instance_id, online=True, version="3.2.582.0")


def member_detached(emu: Emulation, fx: ArrayFixture) -> None:
    boto3.client("ec2").detach_volume(VolumeId=fx.member_ids[2], InstanceId=fx.instance_id)
    emu.clock.advance(emu.double.detach_seconds + 1)


def wrong_configured_id(emu: Emulation, fx: ArrayFixture) -> None:
    del fx
    name_in_config(emu, "db1", "i-0123456789abcdef0")


def quota_too_small(emu: Emulation, fx: ArrayFixture) -> None:
    del fx
    emu.double.fsr_region_limit = 2


def no_schedule(emu: Emulation, fx: ArrayFixture) -> None:
    backed_up(emu.hosts, emu.run, fx)


@pytest.mark.parametrize(
    ("case", "world", "check", "said", "fix"),
    [
        (
            "no instance tagged",
            with_(healthy, untag),
            "tag",
            "no running instance carries raidsnap:array=db1",
            "aws ec2 create-tags --resources <instance id> --tags Key=raidsnap:array,Value=db1",
        ),
        (
            "tagged instance stopped",
            with_(healthy, stopped),
            "tag",
            "no running instance carries raidsnap:array=db1 (i-",
            "start it",
        ),
        (
            "two instances tagged",
            with_(healthy, second_holder),
            "tag",
            "2 running instances carry raidsnap:array=db1",
            "take the tag off the instances that do not hold db1",
        ),
        (
            "tag on another instance than recorded",
            with_(healthy, moved_tag),
            "tag",
            "but raidsnap records db1 on i-",
            "raidsnap move db1 i-",
        ),
        (
            "agent offline",
            with_(healthy, agent_offline),
            "agent",
            "is not online",
            "AmazonSSMManagedInstanceCore",
        ),
        (
            "agent too old",
            with_(healthy, agent_old),
            "agent",
            "is version 3.2.582.0, older than 3.3.2746.0",
            "AWS-UpdateSSMAgent",
        ),
        (
            "no set recorded",
            schedule(),
            "members",
            "db1 has no complete set, so no members are recorded",
            "raidsnap backup db1",
        ),
        (
            "a recorded member no longer attached",
            with_(healthy, member_detached),
            "members",
            "is no longer attached to i-",
            "raidsnap backup db1",
        ),
        (
            "configured instance id that does not exist",
            with_(healthy, wrong_configured_id),
            "instances",
            "i-0123456789abcdef0 does not exist in this Region",
            "correct the instance ids under arrays.db1",
        ),
        (
            "fsr quota too small for the members",
            with_(healthy, quota_too_small),
            "fsr quota",
            "room for 2, the array has 3 members",
            "request an increase of Service Quotas ebs L-631ECBD3",
        ),
        (
            "no backup schedule",
            no_schedule,
            "schedule",
            "no schedule starts backups of db1",
            "add arrays.db1.schedule to the configuration",
        ),
        (
            "schedule disabled",
            with_(no_schedule, schedule("DISABLED")),
            "schedule",
            "raidsnap-backup-db1 is DISABLED",
            "EventBridge Scheduler console",
        ),
    ],
)
def test_doctor_names_each_problem_with_its_fix_and_exits_1(  # noqa: PLR0917 - the table's columns
    cli: Cli, case: str, world: object, check: str, said: str, fix: str
) -> None:
    result = cli("doctor", "db1", "--emulation", prepare=world)  # type: ignore[arg-type]

    assert result.exit_code == 1, f"{case}: {result.output}"
    line = finding(result.stdout, check)
    assert line.startswith("PROBLEM "), f"{case}: {line}"
    assert said in line, f"{case}: {line}"
    assert "Fix: " in line and fix in line, f"{case}: {line}"


def test_doctor_says_cannot_tell_when_a_check_is_denied(cli: Cli) -> None:
    def denied(emu: Emulation, fx: ArrayFixture) -> None:
        from raidsnap_emulation.double import AwsError  # noqa: PLC0415

        healthy(emu, fx)

        def deny(params: dict[str, object]) -> dict[str, object]:
            raise AwsError("AccessDeniedException", "not allowed: scheduler:ListSchedules")

        emu.double.route("scheduler", "ListSchedules", deny)

    result = cli("doctor", "db1", "--emulation", prepare=denied)

    line = finding(result.stdout, "schedule")
    assert line.startswith("cannot tell ")
    assert "AccessDeniedException" in line
    assert "this check needs scheduler:ListSchedules, scheduler:GetSchedule" in line
    assert result.exit_code == 0, result.output
