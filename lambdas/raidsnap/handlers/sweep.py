"""On a schedule, and as the stack's custom resource: raidsnap.workflows.sweeper."""

from __future__ import annotations

from raidsnap.environment import SweeperSettings
from raidsnap.handlers._entry import entry
from raidsnap.workflows import stack_deletion, sweeper


@entry
def handler(event: dict[str, object]) -> object:
    s = SweeperSettings.from_env()
    if "RequestType" in event:  # CloudFormation's request to the custom resource
        return stack_deletion.answer(event, s, sweeper.sweep).dump()
    return sweeper.sweep(s.lock_table, s.restore_executions, s.kept_arrays).report().dump()
