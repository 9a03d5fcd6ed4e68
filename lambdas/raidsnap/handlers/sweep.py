"""On a schedule, and as the stack's custom resource: raidsnap.workflows.sweeper."""

from __future__ import annotations

from raidsnap.environment import SweeperSettings
from raidsnap.handlers._entry import entry
from raidsnap.workflows.sweeper import StackRequest, answer_stack, sweep


@entry
def handler(event: dict[str, object]) -> object:
    s = SweeperSettings.from_env()
    if "RequestType" in event:  # CloudFormation's request to the custom resource
        return answer_stack(StackRequest.model_validate(event), s).dump()
    return sweep(s.lock_table, s.restore_executions, s.kept_arrays).report().dump()
