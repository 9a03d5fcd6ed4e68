"""Review of issue 25: a run's cost must count every state transition Step Functions bills.

AWS Step Functions pricing (https://aws.amazon.com/step-functions/pricing/, Standard
Workflows): "You are charged for the total number of state transitions across all your state
machines, including retries." and "If you include retry error handling in any steps of your
workflow, each retry will be charged as an additional state transition."

raidsnap_cost counts one transition per *StateEntered event (run_cost.usage_of, and the
emulation's Execution.transitions says the same): a Task retried by its Retry field is entered
once, however many times it is retried, so every retry goes uncounted. The new ThrottledError
Retry (40 attempts, lib/constructs/workflow.ts) makes this the common case in a fleet: the
restore below, among a fleet that holds CreateVolume's bucket empty 25 minutes, is retried 13
times and `raidsnap status` / the run's own output price 40 transitions where AWS bills 53.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import boto3
from test_sustained_throttling import FLEET_MINUTES, replacement

from raidsnap_cli import costs
from raidsnap_emulation.double.limits import RateLimits
from raidsnap_emulation.harness import Emulation, Execution
from raidsnap_emulation.world import (
    alarm_event,
    backed_up,
    configure_fast_restore,
    make_array,
)


def billed_transitions(run: Execution) -> int:
    """States entered, plus one for each retry: a Lambda Task's invocation scheduled again
    after it failed (each LambdaFunctionScheduled beyond the first of a TaskStateEntered)."""
    entered = sum(1 for e in run.events if e["type"].endswith("StateEntered"))
    tasks = sum(1 for e in run.events if e["type"] == "TaskStateEntered")
    scheduled = sum(1 for e in run.events if e["type"] == "LambdaFunctionScheduled")
    return entered + (scheduled - tasks)


def test_a_throttled_restore_prices_every_retry_as_a_transition(emu: Emulation) -> None:
    target = replacement(emu)
    limits = RateLimits.documented()
    limits.hold("ec2", "CreateVolume", emu.clock.now() + timedelta(minutes=FLEET_MINUTES))
    emu.double.rate_limits = limits

    run = emu.run(
        "restore",
        {"array": "db1", "targetInstanceId": target, "initialization": "none"},
    )
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    billed = billed_transitions(run)
    assert billed > run.transitions  # the restore was retried (ThrottledError)

    # raidsnap status <run>
    used = costs.usage(boto3.client("stepfunctions"), run.arn)
    assert used.transitions == billed, (
        f"raidsnap status prices {used.transitions} transitions; AWS bills {billed} "
        "(each retry is an additional state transition)"
    )
    # the run's own output (RestoreFinish reads its history)
    own = {line["item"]: line for line in run.output["cost"]["lines"]}
    assert own["state transitions"]["quantity"] == str(billed)


def test_a_backup_that_keeps_fsr_on_its_set_counts_the_dsu_hours_it_started(
    emu: Emulation,
) -> None:
    """A backup of an array with a fastRestore policy enables FSR on its new set (KeepFsr) and
    leaves it enabled: 3 snapshot-zone pairs, each billed at least one DSU-hour from the moment
    it is enabled (Amazon EBS pricing, Fast Snapshot Restore: "billed in Data Services
    Unit-Hours (DSUs) for each Availability Zone in which they are enabled ... billed per minute
    with a 1-hour minimum", https://aws.amazon.com/ebs/pricing/; the price table's own
    fsrDsuHour entry says the same). The issue asks every backup's cost to carry "FSR DSU-hours
    (per pair, enabled to disabled)"; the backup's cost has no FSR at all (usage_of reads FSR
    only from a restore's step results), though this run alone commits the account to at least
    3 x $0.75 and then $0.75 an hour per pair while the policy keeps the set."""
    fx = make_array(emu.hosts, "db1", 3, unrelated=0)
    emu.double.fsr_region_limit = 10
    configure_fast_restore(emu, "db1", [fx.availability_zone], sets=1)
    run = emu.run("backup", {"array": "db1"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["fastRestore"]["status"] == "kept", run.output["fastRestore"]

    cost = costs.run_cost_of(boto3.client("stepfunctions"), run.arn)
    fsr = [x for x in [*cost.lines, *cost.monthly] if "FSR" in x.item]
    assert fsr, f"no FSR in the backup's cost: {cost.text()}"
    assert sum(x.usd for x in fsr) >= 3 * Decimal("0.75")


def test_raidsnap_status_of_a_recovery_counts_the_restore_it_started(
    emu: Emulation,
) -> None:
    """README "What one run cost": `raidsnap status <run>` shows "the restore a drill or
    recovery started". A recovery starts its restore from a Lambda function (StartRestore,
    lambda:invoke.waitForTaskToken), not with startExecution.sync, so the restore's ARN never
    appears under "ExecutionArn" in the recovery's history and raidsnap_cli.costs._children
    finds no child: the recovery's cost leaves out every transition, invocation and volume of
    the restore that did the work (Step Functions bills those transitions, "AWS Step Functions
    pricing", and EBS the volumes it created)."""
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    emu.hosts.lose_member(fx.instance_id, fx.member_ids[1])
    started = emu.invoke("recovery_start", alarm_event(fx.instance_id))
    assert started.error_type is None, started.error_message
    run = emu.wait(started.result["executionArn"])
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    sfn = boto3.client("stepfunctions")
    (listed,) = sfn.list_executions(stateMachineArn=emu.state_machines["restore"])["executions"]
    restore = emu.wait(listed["executionArn"])

    used = costs.usage(sfn, run.arn)

    assert used.transitions == run.transitions + restore.transitions, (
        f"raidsnap status {run.arn} counts {used.transitions} transitions: the recovery's "
        f"{run.transitions}, not its restore's {restore.transitions}"
    )
    assert len(used.volumes) == len(restore.output["volumeIds"])


def test_a_recovery_counts_the_lambda_invocation_of_its_callback_task(
    emu: Emulation,
) -> None:
    """StartRestore invokes RecoveryStep through lambda:invoke.waitForTaskToken: its history
    shows TaskScheduled/TaskStarted/TaskSubmitted (resourceType lambda), not
    LambdaFunctionScheduled/Started/Succeeded, so usage_of counts no request and no duration
    for it. Lambda bills every invocation, however it is invoked ("AWS Lambda pricing":
    requests and duration)."""
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    emu.hosts.lose_member(fx.instance_id, fx.member_ids[1])
    started = emu.invoke("recovery_start", alarm_event(fx.instance_id))
    assert started.error_type is None, started.error_message
    run = emu.wait(started.result["executionArn"])
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    invoked = sum(
        1
        for e in run.events
        if e["type"] == "LambdaFunctionScheduled"
        or (
            e["type"] == "TaskScheduled"
            and (e.get("taskScheduledEventDetails") or {}).get("resourceType") == "lambda"
        )
    )

    used = costs.usage(boto3.client("stepfunctions"), run.arn)

    assert len(used.lambda_seconds) == invoked
