"""A restore among a fleet's: EC2's buckets stay empty for many minutes while a thousand
restores draw on them (bench/fleet.py measures how long), and each restore must still finish,
or fail and remove what it created. The documented buckets are on (limits.py); the rest of the
fleet is modelled by holding a bucket empty for a stretch of the virtual clock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import boto3

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.double.limits import RateLimits
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    backed_up,
    launch_instance,
    make_array,
    name_in_config,
    terminate,
)

# bench/fleet.py: 1,000 restores of 3-member arrays keep CreateVolume's bucket (5 a second)
# empty for about 11 minutes and the mutating bucket for longer; more members, longer still.
FLEET_MINUTES = 25


def replacement(emu: Emulation) -> str:
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    terminate(fx.instance_id)
    target = launch_instance("db1-new", fx.availability_zone, tag_array=False)
    name_in_config(emu, "db1", target)
    return target


def created_by(arn: str) -> list[dict[str, Any]]:
    return boto3.client("ec2").describe_volumes(
        Filters=[{"Name": "tag:raidsnap:restore-execution", "Values": [arn]}]
    )["Volumes"]


def throttled(emu: Emulation, operation: str) -> int:
    return sum(
        1
        for c in emu.double.calls
        if c.operation == operation and c.error_code == "RequestLimitExceeded"
    )


def test_a_restore_outlasts_a_fleet_holding_create_volume_empty(emu: Emulation) -> None:
    target = replacement(emu)
    limits = RateLimits.documented()
    limits.hold("ec2", "CreateVolume", emu.clock.now() + timedelta(minutes=FLEET_MINUTES))
    emu.double.rate_limits = limits

    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})

    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert len(created_by(run.arn)) == 3  # retried, never doubled (ClientToken)
    assert throttled(emu, "CreateVolume") > 0


def test_a_failed_restore_removes_its_volumes_though_delete_volume_is_held(
    emu: Emulation,
) -> None:
    target = replacement(emu)
    emu.hosts.fail_next(
        "assemble", CommandOutcome(status="Failed", stderr="mdadm: busy", exit_code=1)
    )
    limits = RateLimits.documented()
    limits.hold("ec2", "DeleteVolume", emu.clock.now() + timedelta(minutes=FLEET_MINUTES))
    emu.double.rate_limits = limits

    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})

    assert (run.status, run.error) == ("FAILED", "CommandFailed")
    assert created_by(run.arn) == []
    assert throttled(emu, "DeleteVolume") > 0
