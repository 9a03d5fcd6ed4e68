"""A launch's recovery keeps its lifecycle action alive from a Parallel branch while its
restore runs. One heartbeat that fails (ResourceContention, the one error botocore's model lists
for RecordLifecycleActionHeartbeat, HTTP 500, once it outlasts the SDK's retries) fails that
branch, which fails the Parallel ("Parallel", developer guide: a failed branch fails the state
and stops the others), and the recovery completes the action with ABANDON: the group terminates
the instance. The restore the recovery started is not stopped and goes on attaching and mounting
the array on the instance being given up. A heartbeat that fails is retried, and then waited
out within its branch: it never fails the Parallel."""

from __future__ import annotations

from collections.abc import Callable, Iterator
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


@pytest.fixture(scope="module")
def example_template() -> Path:
    return synthesize(config=EXAMPLE_CONFIG)


@pytest.fixture
def example_emu(example_template: Path) -> Iterator[Emulation]:
    with Emulation(example_template) as emulation:
        yield emulation


def _second_heartbeat_fails(emu: Emulation, then: Callable[[], None]) -> list[int]:
    """The second heartbeat fails; ``then`` runs at the one after it (its retry). Returns the
    count of heartbeats asked for."""
    calls = [0]

    def heartbeat(params: dict[str, Any]) -> Any:
        calls[0] += 1
        if calls[0] == 2:
            raise AwsError("ResourceContention", "You already have a pending update", 500)
        if calls[0] == 3:
            then()
        return emu.double._lifecycle_heartbeat(params)

    emu.double.route("autoscaling", "RecordLifecycleActionHeartbeat", heartbeat)
    return calls


def test_one_failed_heartbeat_does_not_abandon_the_launch_its_restore_is_mounting_on(
    example_emu: Emulation,
) -> None:
    # GIVEN analytics, backed up, whose instance is gone, a new instance of its group held in
    # Pending:Wait, and a restore that takes longer than one heartbeat interval to mount
    emu = example_emu
    token = "6e7f8091-1111-2222-3333-444455556666"  # noqa: S105 - a lifecycle action id
    _, new = held_launch(emu, token)
    held = HeldStep(emu, "restore_attach")
    # (the restore goes on only once the failed heartbeat was asked again: a recovery waits for
    # its restore, so waiting for the recovery first would wait for a restore held forever)
    heartbeats = _second_heartbeat_fails(emu, then=held.release)
    # WHEN the launch starts a recovery, and its second heartbeat fails while the restore
    # has not attached its volumes yet
    answer = emu.invoke(
        "recovery_start", launch_event("analytics", new, token=token, hook="raidsnap-analytics")
    )
    assert answer.error_type is None, answer.error_message
    arn = str(answer.result["executionArn"])
    held.wait()
    run = emu.wait(arn)
    assert heartbeats[0] >= 3, heartbeats
    sfn = boto3.client("stepfunctions")
    (restore,) = sfn.list_executions(stateMachineArn=emu.state_machines["restore"])["executions"]
    restored = emu.wait(restore["executionArn"])
    # THEN the restore mounts the array on the new instance ...
    assert restored.status == "SUCCEEDED", f"{restored.error}: {restored.cause}"
    assert restored.output["targetInstanceId"] == new
    # ... and the instance holding it is not given up to the group: the recovery goes on to the
    # end of its restore and puts it into service
    assert emu.double.lifecycle_result(token)[0] != "ABANDON", (run.status, run.error, run.cause)
    assert (run.status, emu.double.lifecycle_result(token)[0]) == ("SUCCEEDED", "CONTINUE")
