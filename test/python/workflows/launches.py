"""A launch held by the stack's lifecycle hook, as the recovery tests of an Auto Scaling group
start from it."""

from __future__ import annotations

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    ArrayFixture,
    backed_up,
    configure_recovery,
    create_topics,
    launch_instance,
    make_array,
    terminate,
)


def held_launch(
    emu: Emulation, token: str, heartbeat_timeout: float = 3600.0
) -> tuple[ArrayFixture, str]:
    """analytics (3 x 1 TiB, backed up) recovered by its group, its instance gone, and a new
    instance of the group held in Pending:Wait by the stack's hook under ``token`` (the hook's
    heartbeat timeout: an hour unless said): the array's fixture and the new instance."""
    create_topics(emu)
    fx = make_array(emu.hosts, "analytics", 3, size_gib=1024, unrelated=0)
    backed_up(emu.hosts, emu.run, fx)
    configure_recovery(
        emu,
        "analytics",
        instanceId=fx.instance_id,
        autoScalingGroup="analytics",
        initialization="none",
    )
    terminate(fx.instance_id)
    new = launch_instance(
        "analytics-asg", fx.availability_zone, tag_array=False, auto_scaling_group="analytics"
    )
    emu.double.lifecycle_action(
        "analytics", "raidsnap-analytics", token, new, heartbeat_timeout=heartbeat_timeout
    )
    return fx, new
