"""Every restore and recovery Task crashed in turn (its function's runtime dies on every
invocation), in replace and attach mode, RAID 0 and RAID 10: each run ends with the old array in
service or the new one, never with neither unless its cause says so and how to bring the array
back. The restore's crash after assembly leaves the new array, a crash before release leaves the
old one, and a crash between release and assembly puts the old one back."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from faults import crash

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    ArrayFixture,
    alarm_event,
    backed_up,
    create_topics,
    launch_instance,
    make_array,
    restored_volumes,
)

RESTORE_TASKS = [
    "restore_prepare",
    "restore_create_volumes",
    "restore_check_volumes",
    "restore_command",
    "command_poll",
    "restore_detach_old",
    "restore_attach",
    "restore_finish",
]
LEVELS = {"raid0": 3, "raid10": 4}


def in_service(emu: Emulation, instance_id: str, mount_point: str) -> list[str] | None:
    """The members of the md array mounted at ``mount_point`` on the instance, if one is."""
    for md in emu.hosts.state(instance_id).arrays.values():
        if md.mount_point == mount_point and not md.failed:
            return list(md.members)
    return None


def explained(cause: str) -> bool:
    return "not in service" in cause and ("To bring it back" in cause or "Do not attach" in cause)


def check(emu: Emulation, fx: ArrayFixture, run: Any, target: str) -> None:
    created = sorted(v["VolumeId"] for v in restored_volumes(run.arn) if v["State"] != "deleted")
    old = in_service(emu, fx.instance_id, fx.mount_point)
    new = in_service(emu, target, fx.mount_point) if target != fx.instance_id else old
    cause = run.cause or ""
    if old == fx.member_ids:
        return  # the old array is in service, as it was
    if new is not None and sorted(new) == created:
        return  # the new array is in service
    assert run.status == "FAILED" and explained(cause), (
        f"{run.status}: neither array in service on {target}; cause: {cause}"
    )


@pytest.mark.parametrize("level", sorted(LEVELS))
@pytest.mark.parametrize("mode", ["replace", "attach"])
@pytest.mark.parametrize("task", RESTORE_TASKS)
def test_a_crashed_restore_task_leaves_an_array_in_service(
    emu: Emulation, task: str, mode: str, level: str
) -> None:
    fx = make_array(emu.hosts, "db1", LEVELS[level], level=level)
    backed_up(emu.hosts, emu.run, fx)
    target = fx.instance_id
    request: dict[str, Any] = {"array": "db1", "mode": mode, "initialization": "prewarm"}
    if mode == "attach":
        target = launch_instance("db1-copy", fx.availability_zone)
        request["targetInstanceId"] = target
    crash(emu, task)
    run = emu.run("restore", request)
    check(emu, fx, run, target)
    if mode == "attach":  # the array's own instance is never touched by an attach restore
        assert in_service(emu, fx.instance_id, fx.mount_point) == fx.member_ids


@pytest.mark.parametrize("level", sorted(LEVELS))
@pytest.mark.parametrize("after", [0, 1, 2, 3])
def test_a_crashed_recovery_step_leaves_an_array_in_service(
    emu: Emulation, after: int, level: str
) -> None:
    create_topics(emu)
    fx = make_array(emu.hosts, "db1", LEVELS[level], level=level)
    backed_up(emu.hosts, emu.run, fx)
    if level == "raid0":
        emu.hosts.drop_device(fx.instance_id, fx.member_ids[0])  # RAID 0 cannot run on
    else:
        emu.hosts.degrade(fx.instance_id, fx.member_ids[0])  # md serves RAID 10 degraded
    emu.double.impair_volume(fx.member_ids[0])
    crash(emu, "recovery_step", after=after)
    started = emu.invoke("recovery_start", alarm_event(fx.instance_id))
    assert started.error_type is None, started.error_message
    run = emu.wait(started.result["executionArn"])
    members = in_service(emu, fx.instance_id, fx.mount_point)
    if level == "raid10":
        # md serves the degraded RAID 10: never rolled back, whatever step crashed
        assert members == fx.member_ids, run.cause
        return
    # RAID 0 lost a member: the old array was gone before the recovery. A restore the recovery
    # started carries on and ends with the new array in service; a recovery that crashed before
    # starting one fails, and says why
    if members is None:
        assert run.status == "FAILED", run.output
        assert run.cause, run
    else:
        restored = [v["VolumeId"] for e in _restores(emu) for v in restored_volumes(e)]
        assert sorted(members) == sorted(restored), (members, restored)


def _restores(emu: Emulation) -> list[str]:
    sfn = boto3.client("stepfunctions")
    found = sfn.list_executions(stateMachineArn=emu.state_machines["restore"])["executions"]
    return [e["executionArn"] for e in found]
