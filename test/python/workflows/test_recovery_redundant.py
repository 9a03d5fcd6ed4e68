"""A redundant array that md still serves is not rolled back. RAID 10 (or 1, 5, 6) runs on
with a member faulty: replacing the whole array with the newest set would take every write since
that set out of service. The recovery notifies instead, naming the failed member and the md
commands that replace it; a rollback is the operator's explicit choice (a replace restore)."""

from __future__ import annotations

from typing import Any

import pytest

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    alarm_event,
    backed_up,
    create_topics,
    make_array,
    restored_volumes,
)


def recover(emu: Emulation, instance_id: str) -> Any:
    started = emu.invoke("recovery_start", alarm_event(instance_id))
    assert started.error_type is None, started.error_message
    return emu.wait(started.result["executionArn"])


def published(emu: Emulation) -> list[dict[str, Any]]:
    return [c.params for c in emu.double.calls if (c.service, c.operation) == ("sns", "Publish")]


@pytest.mark.parametrize("removed", [False, True], ids=["faulty", "removed"])
def test_a_raid10_that_md_still_serves_is_not_rolled_back(emu: Emulation, removed: bool) -> None:
    # GIVEN db1, RAID 10 of four members, backed up
    create_topics(emu)
    fx = make_array(emu.hosts, "db1", 4, level="raid10")
    backed_up(emu.hosts, emu.run, fx)
    # AND one member fails: EC2's status check says impaired, md marks it faulty (or it was
    # removed) and serves the array degraded
    failed = fx.member_ids[2]
    emu.double.impair_volume(failed)
    emu.hosts.degrade(fx.instance_id, failed, removed=removed)
    before = list(emu.hosts.state(fx.instance_id).arrays["/dev/md0"].members)
    mark = len(emu.double.calls)
    # WHEN the attached-EBS alarm starts a recovery
    run = recover(emu, fx.instance_id)
    # THEN no restore ran and nothing was detached: the array md serves stays in service
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["action"] == "degraded", run.output
    after = [c for c in emu.double.calls[mark:] if c.applied]
    ops = {c.operation for c in after}
    assert not ops & {"CreateVolume", "DetachVolume"}, ops
    restores = [
        c
        for c in after
        if c.operation == "StartExecution"
        and c.params.get("stateMachineArn") == emu.state_machines["restore"]
    ]
    assert restores == []
    md = emu.hosts.state(fx.instance_id).arrays["/dev/md0"]
    assert md.members == before and md.mount_point == fx.mount_point
    # AND the operators are told which member failed and how to replace it with md
    (note,) = [p for p in published(emu)[-1:]]
    assert "degraded" in note["Subject"]
    message = note["Message"]
    assert failed in message and "slot 2" in message
    # (a member md still lists as faulty is taken out first; a removed one needs no more)
    steps = ["mdadm /dev/md0 --add", "/proc/mdstat"]
    steps += [] if removed else ["mdadm /dev/md0 --fail", "--remove"]
    for command in steps:
        assert command in message, message
    assert ("--fail" in message) is not removed
    assert "raidsnap restore db1 --mode replace" in message  # the rollback, only if asked for


def test_a_raid0_with_an_impaired_member_is_still_recovered(emu: Emulation) -> None:
    # RAID 0 cannot run degraded: an impaired member means the array is lost
    create_topics(emu)
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    emu.double.impair_volume(fx.member_ids[1])
    run = recover(emu, fx.instance_id)
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["action"] == "restored", run.output
    assert restored_volumes(run.output["restoreExecutionArn"])


def test_a_raid10_whose_instance_cannot_be_asked_is_not_rolled_back_on_ec2s_word(
    emu: Emulation,
) -> None:
    # GIVEN db1, RAID 10, one member impaired, and the instance's agent offline
    create_topics(emu)
    fx = make_array(emu.hosts, "db1", 4, level="raid10")
    backed_up(emu.hosts, emu.run, fx)
    emu.double.impair_volume(fx.member_ids[0])
    emu.double.set_agent(fx.instance_id, online=False)
    # WHEN the alarm starts a recovery
    run = recover(emu, fx.instance_id)
    # THEN it does not roll back a set on EC2's word alone, and says how to look
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["action"] == "degraded", run.output
    assert run.output["degraded"]["seen"] is False
    assert "cat /proc/mdstat" in run.output["message"]
    assert "/dev/md0" in emu.hosts.state(fx.instance_id).arrays
