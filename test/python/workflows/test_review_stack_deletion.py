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
from faults import crash
from test_kept_fsr import ZONE, backup, kept_array, states
from test_stack_deletion import Responses, request, serving

from raidsnap.aws import kept_fsr, lock
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.template import STACK_ID
from raidsnap_emulation.world import (
    SLOW_EBS_INSTANCE_TYPE,
    HeldStep,
    backed_up,
    configure_fast_restore,
    lock_table,
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


def test_a_lock_left_by_an_ended_restore_blocks_the_deletion_as_if_a_restore_ran(
    emu: Emulation,
) -> None:
    # GIVEN db1's fastRestore policy keeps FSR on its newest set, and a restore of that set
    # whose volume ends in error and whose cleanup crashes: the run has ENDED (FAILED), but its
    # lock item stays until its lease (LOCK_LEASE_SECONDS, three days by default) runs out
    kept_array(emu)
    ids = backup(emu).output["snapshotIds"]
    emu.double.fail_volumes(min(ids))
    crash(emu, "restore_cleanup")
    run = emu.run("restore", {"array": "db1", "mode": "replace"})
    assert run.status == "FAILED"
    holder = lock.current(lock_table(), "db1")
    assert holder is not None and holder.execution_arn == run.arn
    # a restore would take this lock over: its holder is gone
    assert not lock.running(run.arn)
    # WHEN the stack is deleted
    emu.double.stacks[STACK_ID] = "DELETE_IN_PROGRESS"
    with serving(Responses()) as responses:
        emu.invoke("sweep", request("Delete", responses.url))
    [body] = responses.bodies
    # THEN the kept set's FSR goes off: no restore uses it. As it is, lock.sets_held goes by
    # the lease alone, so the answer is FAILED ("keeps its FSR while a restore uses it ... Delete
    # the stack again once no restore runs") while none runs, and every retry of the deletion
    # fails the same way for up to three days.
    assert body["Status"] == "SUCCESS", body["Reason"]
    assert set(states(ids).values()) <= {"disabling", "disabled"}


def test_a_backup_that_keeps_fsr_after_the_deletion_swept_leaves_it_on_with_nothing_to_end_it(
    emu: Emulation,
) -> None:
    # The custom resource depends on the restore workflow only (template: DependsOn
    # RestoreWorkflowStateMachine*), not on the backup workflow or its KeepFsr function, so
    # CloudFormation deletes those in parallel with, or after, answering the Delete
    # (CloudFormation Template Reference, DependsOn attribute: "CloudFormation creates, updates,
    # and deletes resources in parallel to the extent possible"; only a Ref/GetAtt/DependsOn
    # orders a deletion). DeleteStateMachine only terminates an execution "on the next state
    # transition": a KeepFsr invocation already in flight, or one a backup enters before its
    # state machine goes, claims and enables FSR for the new set after the sweep looked.
    # GIVEN db1 with a fastRestore policy, and a backup whose KeepFsr step is invoked but not
    # yet run
    kept_array(emu)
    held = HeldStep(emu, "backup_keep_fsr")
    arn = emu.start("backup", {"array": "db1"})
    held.wait()
    # WHEN the stack is deleted meanwhile and the custom resource's Delete is answered
    emu.double.stacks[STACK_ID] = "DELETE_IN_PROGRESS"
    with serving(Responses()) as responses:
        emu.invoke("sweep", request("Delete", responses.url))
    [body] = responses.bodies
    # AND the KeepFsr invocation then runs
    held.release()
    run = emu.wait(arn)
    ids = run.output["snapshotIds"]
    # THEN nothing a fastRestore policy kept is left on once the Delete said SUCCESS. As it is:
    # SUCCESS ("0 sets a fastRestore policy kept"), then the new set's FSR goes on, with the
    # schedule, sweeper and lock table about to go.
    on = {s for s, state in states(ids).items() if state in ACTIVE}
    assert body["Status"] == "FAILED" or not on, (
        body["Status"],
        body["Reason"],
        sorted(on),
    )


def test_turning_off_one_of_two_kept_sets_while_a_restore_holds_the_other_is_allowed(
    emu: Emulation,
) -> None:
    # The sweeper's role allowed Scan, DeleteItem and GetItem on the lock table
    # (lib/constructs/sweeper.ts), but kept_fsr.turn_off rewrites the claim with the sets left
    # (kept_fsr._write: PutItem) when a restore holds one of them. Service Authorization
    # Reference, Amazon DynamoDB: PutItem is its own action (dynamodb:PutItem, resource table).
    # (At the stack's deletion a running restore now stops the Delete before anything is
    # turned off; the sweep after a policy's removal still takes this path.)
    # GIVEN db1's policy keeps two sets, and a running restore holds the newest
    emu.double.fsr_region_limit = 12
    kept_array(emu)
    configure_fast_restore(emu, "db1", [ZONE], sets=2)
    first = backup(emu).output
    emu.clock.advance(3600)
    newest = backup(emu).output
    held = HeldStep(emu, "restore_check_volumes")
    arn = emu.start("restore", {"array": "db1", "mode": "replace"})
    held.wait()
    try:
        holder = lock.current(lock_table(), "db1")
        assert holder is not None and holder.set_id == newest["setId"]
        # WHEN the policy is removed and the sweeper runs
        configure_fast_restore(emu, "db1", [ZONE], sets=0)
        swept = emu.invoke("sweep", {})
        # THEN the older set goes off and out of the claim; the held set keeps its FSR
        assert swept.error_type is None, swept.error_message
        assert swept.result["keptSetsDisabled"] == [first["setId"]], swept.result
        assert set(states(first["snapshotIds"]).values()) <= {"disabling", "disabled"}
        denied = [d.request.action for d in emu.iam.denied()]
        assert denied == [], denied  # as it was: ["dynamodb:PutItem"]
        assert [s.set_id for s in kept_fsr.read(lock_table(), "db1").sets] == [newest["setId"]]
    finally:
        held.release()
    emu.wait(arn)
