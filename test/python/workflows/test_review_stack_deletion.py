"""Review of the stack's deletion (cd8e4b5): what the sweeper's custom resource leaves on, or
billed, when CloudFormation deletes the stack.

AWS behaviour relied on:
- Step Functions API Reference, DeleteStateMachine: "A state machine is deleted only when all its
  executions are completed. On the next state transition, the state machine's executions are
  terminated." A restore running when the stack goes never reaches its own failure path, and
  the EventBridge rule and sweeper that clean up after a stopped run go with the stack too.
- EBS User Guide, "Fast snapshot restore": FSR is billed per snapshot and zone for each hour it
  is enabled, until it is disabled or the snapshot deleted.
"""

from __future__ import annotations



import boto3
from test_stack_deletion import Responses, request, serving

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.template import STACK_ID
from raidsnap_emulation.world import (
    SLOW_EBS_INSTANCE_TYPE,
    HeldStep,
    backed_up,
    make_array,
)

ACTIVE = ("enabling", "optimizing", "enabled")


def fsr_active(zone: str) -> list[str]:
    rows = boto3.client("ec2").describe_fast_snapshot_restores(
        Filters=[{"Name": "availability-zone", "Values": [zone]}]
    )["FastSnapshotRestores"]
    return sorted(r["SnapshotId"] for r in rows if r["State"] in ACTIVE)


def test_fsr_a_running_restore_enabled_is_neither_turned_off_nor_named_when_the_stack_goes(
    emu: Emulation,
) -> None:
    # GIVEN a replace restore with initialization "fsr", running (held while EC2
    # creates its volumes), with FSR on for the set's snapshots: the run's own FSR claim, no
    # fastRestore policy involved
    fx = make_array(emu.hosts, "db1", 3, instance_type=SLOW_EBS_INSTANCE_TYPE)
    backed_up(emu.hosts, emu.run, fx)
    held = HeldStep(emu, "restore_check_volumes")
    emu.start("restore", {"array": "db1", "mode": "replace", "initialization": "fsr"})
    held.wait()
    try:
        assert fsr_active(fx.availability_zone)
        # WHEN the stack is deleted and CloudFormation sends the custom resource its Delete
        emu.double.stacks[STACK_ID] = "DELETE_IN_PROGRESS"
        with serving(Responses()) as responses:
            answered = emu.invoke("sweep", request("Delete", responses.url))
        assert answered.error_type is None, answered.error_message
        [body] = responses.bodies
        # THEN either the run's FSR is off, or the deletion stops (FAILED) naming it, as it does
        # for a kept set a restore holds. As it is: SUCCESS, "turned off FSR of 0 pairs", the
        # pairs stay enabled, and once the stack goes the restore is terminated (no failure
        # path), its rule and the sweeper are gone: FSR billed by the hour with nothing left
        # that knows of it.
        left_on = fsr_active(fx.availability_zone)
        assert body["Status"] == "FAILED" or not left_on, (body, left_on)
    finally:
        held.release()


