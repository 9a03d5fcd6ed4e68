"""Settle keeps a launch alive while it looks at a restore that did not report: it records the
heartbeat before its looks. A look that Step Functions throttles past the SDK's retries fails the
step into its Retry (ThrottledError: up to 2.9 hours, lib/constructs/workflow.ts LAMBDA_RETRY);
had the heartbeat waited behind the look, the hook's heartbeat timeout (one hour) would run out
meanwhile, and Auto Scaling would end the action with its default result, ABANDON, and
terminate the instance the restore is mounting the array on ("Complete a lifecycle action",
Amazon EC2 Auto Scaling user guide)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from launches import held_launch

from raidsnap_emulation.double.base import AwsError
from raidsnap_emulation.harness import EXAMPLE_CONFIG, Emulation, synthesize
from raidsnap_emulation.world import (
    HeldStep,
    launch_event,
)

THROTTLED_MINUTES = 45


@pytest.fixture(scope="module")
def example_template() -> Path:
    return synthesize(config=EXAMPLE_CONFIG)


@pytest.fixture
def example_emu(example_template: Path) -> Iterator[Emulation]:
    with Emulation(example_template) as emulation:
        yield emulation


def test_settle_keeps_the_launch_alive_while_its_looks_are_throttled(
    example_emu: Emulation,
) -> None:
    # GIVEN a launch of analytics' group held for its recovery, whose restore is slow to attach
    emu = example_emu
    token = "8091a2b3-1111-2222-3333-444455556666"  # noqa: S105 - a lifecycle action id
    _, new = held_launch(emu, token)
    held = HeldStep(emu, "restore_attach")
    sfn = boto3.client("stepfunctions")
    seen: dict[str, Any] = {"looks": 0}

    def describe_execution(params: dict[str, Any]) -> Any:
        actor = str(emu.double.actor or "")
        if "Recovery" in actor and "Step" in actor and emu.double.lifecycle_result(token)[1]:
            now = emu.clock.now()
            seen["looks"] += 1
            if "until" not in seen:
                # WHEN the heartbeat branch's look fails (Step Functions answers 503 past the
                # SDK's retries), so that Settle takes over ...
                seen["until"] = now + timedelta(minutes=THROTTLED_MINUTES)
                raise AwsError("ServiceUnavailable", "Service unavailable", 503)
            if now < seen["until"]:
                # ... and then throttles every look of Settle's for 45 minutes
                raise AwsError("ThrottlingException", "Rate exceeded")
            held.release()
        return emu.double._passthrough(sfn, "DescribeExecution", params)

    emu.double.route("stepfunctions", "DescribeExecution", describe_execution)
    answer = emu.invoke(
        "recovery_start", launch_event("analytics", new, token=token, hook="raidsnap-analytics")
    )
    assert answer.error_type is None, answer.error_message
    run = emu.wait(str(answer.result["executionArn"]))

    # THEN the launch was kept alive throughout, and put into service with the array
    result, beats = emu.double.lifecycle_result(token)
    assert seen["looks"] > 2, seen
    assert result == "CONTINUE", (result, beats, run.status, run.error, run.cause)
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
