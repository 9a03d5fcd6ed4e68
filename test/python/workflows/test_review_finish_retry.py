"""Review of fix25a: Finish tells a retry from its first attempt by $$.State.RetryCount and, on a
retry, takes an action that is no longer open for one its earlier attempt completed
(finish._continue_launch). But a retry follows a first attempt that FAILED: when that attempt
failed before CompleteLifecycleAction went through (the call itself throttled, or anything
before it), nothing completed the action, and the Task's Retry (LAMBDA_RETRY: 40 attempts, up
to 300 s apart, 2.9 hours at most) sends no heartbeat. The hook's heartbeat timeout (one hour)
runs out, Auto Scaling ends the action with its default result ABANDON and terminates the
instance, and the retry that then finds the action gone reports the array recovered there.

AWS sources relied on:
- Amazon EC2 Auto Scaling User Guide, "Amazon EC2 Auto Scaling lifecycle hooks" / "Complete a
  lifecycle action": if the heartbeat timeout elapses without CompleteLifecycleAction or
  RecordLifecycleActionHeartbeat, the hook's DefaultResult (ABANDON here) is applied and a
  launching instance is terminated. API reference, RecordLifecycleActionHeartbeat: "This extends
  the timeout by the length of time defined using the PutLifecycleHook API call."
- Auto Scaling (Query API) answers a throttled request with the error code Throttling ("Rate
  exceeded"), which raidsnap.aws.THROTTLE_CODES lists and the step raises as ThrottledError.
- Step Functions developer guide, context object: $$.State.RetryCount counts retries of the
  state; it says nothing of what an earlier attempt did before failing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError
from launches import held_launch

from raidsnap_emulation.double.base import AwsError
from raidsnap_emulation.harness import EXAMPLE_CONFIG, Emulation, synthesize
from raidsnap_emulation.world import (
    launch_event,
)


@pytest.fixture(scope="module")
def example_template() -> Path:
    return synthesize(config=EXAMPLE_CONFIG)


@pytest.fixture
def example_emu(example_template: Path) -> Iterator[Emulation]:
    with Emulation(example_template) as emulation:
        yield emulation


def test_a_finish_retried_after_its_completion_was_throttled_does_not_report_an_abandoned_launch(
    example_emu: Emulation,
) -> None:
    # GIVEN analytics, backed up, whose instance is gone, and a new instance of its group held
    # in Pending:Wait by the stack's hook (one-hour heartbeat timeout)
    emu = example_emu
    token = "91a2b3c4-1111-2222-3333-444455556666"  # noqa: S105 - a lifecycle action id
    _, new = held_launch(emu, token)
    seen: dict[str, Any] = {"throttled": 0}

    # WHEN Auto Scaling throttles the recovery's CompleteLifecycleAction (a fleet of launches
    # completing at once) for as long as the action is open: no attempt of Finish completes it
    def complete(params: dict[str, Any]) -> Any:
        open_ = emu.double.lifecycle_result(token)[0] is None
        if params.get("LifecycleActionResult") == "CONTINUE" and open_:
            seen["throttled"] += 1
            raise AwsError("Throttling", "Rate exceeded", 400)
        return emu.double._complete_lifecycle_action(params)

    emu.double.route("autoscaling", "CompleteLifecycleAction", complete)
    answer = emu.invoke(
        "recovery_start", launch_event("analytics", new, token=token, hook="raidsnap-analytics")
    )
    assert answer.error_type is None, answer.error_message
    run = emu.wait(str(answer.result["executionArn"]))

    # THEN the action ran out while Finish was retried (the hook's default result, ABANDON: the
    # instance is being terminated) ...
    result, beats = emu.double.lifecycle_result(token)
    assert seen["throttled"] > 0, "CompleteLifecycleAction was never called with CONTINUE"
    assert result == "ABANDON", (result, run.status, run.error)
    # ... and the recovery must not say the array is recovered on it. Seen: SUCCEEDED, output
    # lifecycleAction CONTINUE: the retry took the gone action for one its earlier attempt had
    # completed.
    output = run.output if isinstance(run.output, dict) else {}
    assert run.status != "SUCCEEDED", (
        f"the recovery SUCCEEDED (lifecycleAction {output.get('lifecycleAction')!r}) while its "
        f"launch {new} was abandoned: {seen['throttled']} throttled completions, heartbeats "
        f"{beats}"
    )
    assert (run.status, run.error) == ("FAILED", "LaunchAbandoned"), run.cause


def test_a_launch_put_into_service_is_not_reported_abandoned_when_finish_fails_after(
    example_emu: Emulation,
) -> None:
    """Finish completes the action with CONTINUE first, then shapes its output, the run's cost
    among it (costs.so_far: GetExecutionHistory, which catches ClientError only). A read that
    times out on the network (botocore ReadTimeoutError, after the SDK's own retries) fails the
    step with an error LAMBDA_RETRY does not retry: the Catch sends the run to Failure, which
    completes the action with ABANDON, finds it no longer open on its first attempt, and writes
    that the action's timeout ran out and Auto Scaling ended it with ABANDON (lifecycleAction
    ABANDON), while the instance is in service with the array mounted on it (CompleteLifecycleAction
    CONTINUE succeeded: Auto Scaling user guide, "Complete a lifecycle action")."""
    emu = example_emu
    token = "a2b3c4d5-1111-2222-3333-444455556666"  # noqa: S105 - a lifecycle action id
    _, new = held_launch(emu, token)
    history = emu.double._execution_history
    seen = {"timeouts": 0}

    def execution_history(params: dict[str, Any]) -> Any:
        actor = str(emu.double.actor or "")
        in_service = emu.double.lifecycle_result(token)[0] == "CONTINUE"
        if in_service and "Recovery" in actor and "Step" in actor:
            seen["timeouts"] += 1
            raise ReadTimeoutError(endpoint_url="https://states.us-east-1.amazonaws.com/")
        return history(boto3.client("stepfunctions"), params)

    emu.double.route("stepfunctions", "GetExecutionHistory", execution_history)
    answer = emu.invoke(
        "recovery_start", launch_event("analytics", new, token=token, hook="raidsnap-analytics")
    )
    assert answer.error_type is None, answer.error_message
    run = emu.wait(str(answer.result["executionArn"]))

    result, _ = emu.double.lifecycle_result(token)
    assert seen["timeouts"] > 0, (run.status, run.error)
    assert result == "CONTINUE"
    # Seen: FAILED, its cause saying the action ran out and ended ABANDON
    output = run.output if isinstance(run.output, dict) else {}
    told = f"{run.status} {run.error}: {run.cause} {output.get('lifecycleAction')}"
    assert "ABANDON" not in told, told


def test_a_continue_that_went_through_is_not_reported_as_a_launch_abandoned(
    example_emu: Emulation,
) -> None:
    """The opposite way round: Finish's CompleteLifecycleAction CONTINUE is carried out, but its
    answer is lost (HTTP 500 after the action was applied, which botocore's standard retry mode
    retries). The SDK's retry finds no active lifecycle action (ValidationError "No active
    Lifecycle Action"), lifecycle.complete returns False on the step's first attempt, and Finish
    raises LaunchAbandoned: the run FAILS saying Auto Scaling is terminating the instance, and
    leaves the array's alarm on the old instance, while the launch is in service with the array
    mounted (Auto Scaling API reference, CompleteLifecycleAction; AWS SDKs and Tools Reference
    Guide, "Retry behavior": standard mode retries 500, 502, 503 and 504 answers)."""
    emu = example_emu
    token = "b3c4d5e6-1111-2222-3333-444455556666"  # noqa: S105 - a lifecycle action id
    _, new = held_launch(emu, token)
    seen = {"lost": 0}

    def complete(params: dict[str, Any]) -> Any:
        answer = emu.double._complete_lifecycle_action(params)
        if params.get("LifecycleActionResult") == "CONTINUE" and not seen["lost"]:
            seen["lost"] += 1
            # The double answers above botocore's retry layer: what the caller sees is the
            # answer to the SDK's retry of the lost call, the action being completed by then.
            raise AwsError(
                "ValidationError", f"No active Lifecycle Action found with token {token}"
            )
        return answer

    emu.double.route("autoscaling", "CompleteLifecycleAction", complete)
    answer = emu.invoke(
        "recovery_start", launch_event("analytics", new, token=token, hook="raidsnap-analytics")
    )
    assert answer.error_type is None, answer.error_message
    run = emu.wait(str(answer.result["executionArn"]))

    result, _ = emu.double.lifecycle_result(token)
    assert seen["lost"] == 1
    assert result == "CONTINUE"
    # Seen: FAILED LaunchAbandoned
    assert (run.status, run.error) == ("SUCCEEDED", None), f"{run.error}: {run.cause}"
