"""A launch whose lifecycle action ran out is no recovery: Auto Scaling ends the action with the
hook's default result (ABANDON) once its heartbeat timeout passes without a heartbeat, and
terminates the instance ("Complete a lifecycle action", Amazon EC2 Auto Scaling user guide;
RecordLifecycleActionHeartbeat restarts the timeout, API reference). Should the restore still
mount the array there, the recovery finds the action gone when it goes to complete it with
CONTINUE, and fails with LaunchAbandoned instead of telling the operators the array is
recovered on an instance that is being terminated."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from launches import held_launch

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


def test_a_recovery_whose_launch_ran_out_fails_launch_abandoned(example_emu: Emulation) -> None:
    # GIVEN analytics, backed up, whose instance is gone, and a new instance of its group whose
    # hook gives up after 10 minutes without a heartbeat (the stack's hook waits an hour, and
    # the recovery paces its heartbeats by that: here they come too late)
    emu = example_emu
    token = "7f8091a2-1111-2222-3333-444455556666"  # noqa: S105 - a lifecycle action id
    _, new = held_launch(emu, token, heartbeat_timeout=600.0)
    # the restore mounts the array only after the action has run out
    held = HeldStep(emu, "restore_attach")

    def heartbeat(params: dict[str, Any]) -> Any:
        if emu.double.lifecycle_result(token)[0] is not None:
            held.release()
        return emu.double._lifecycle_heartbeat(params)

    emu.double.route("autoscaling", "RecordLifecycleActionHeartbeat", heartbeat)

    # WHEN the launch starts a recovery
    answer = emu.invoke(
        "recovery_start", launch_event("analytics", new, token=token, hook="raidsnap-analytics")
    )
    assert answer.error_type is None, answer.error_message
    run = emu.wait(str(answer.result["executionArn"]))

    # THEN the action ended ABANDON, and the recovery says so rather than that it succeeded
    assert emu.double.lifecycle_result(token)[0] == "ABANDON"
    assert (run.status, run.error) == ("FAILED", "LaunchAbandoned"), run.cause
    assert new in run.cause
    assert "no longer open" in run.cause
    assert "raidsnap:restore-execution=" in run.cause
