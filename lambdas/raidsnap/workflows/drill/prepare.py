"""Drill, step 1: validate the request and the drill instance, name the nested restore."""

from __future__ import annotations

import hashlib

from raidsnap import tags
from raidsnap.aws import instances
from raidsnap.environment import DrillSettings
from raidsnap.errors import InvalidInputError
from raidsnap.models import parse_drill_input
from raidsnap.observability import logger
from raidsnap.plan.devices import new_md_uuid
from raidsnap.workflows.drill.contracts import Plan, PlanExecution, PrepareCall, RestoreRequest

# Every restore a drill starts is named drill-<hash>: the drill's IAM policy lets it delete
# only volumes whose raidsnap:restore-execution names such a restore.
RESTORE_NAME_PREFIX = "drill-"


def prepare(call: PrepareCall, settings: DrillSettings) -> Plan:
    """Validate the drill request and the drill instance; build the nested restore's input."""
    request = parse_drill_input(call.input)
    target = request.targetInstanceId
    state, target_tags = instances.instance_facts(target)
    if state == "unknown":
        raise InvalidInputError("targetInstanceId", f"instance {target} does not exist")
    logger.append_keys(array=request.array, target=target)
    held = target_tags.get(tags.ARRAY)
    if held == request.array:
        raise InvalidInputError(
            "targetInstanceId",
            f"{target} holds {request.array} itself; a drill restores a copy onto a separate "
            f"instance tagged {tags.ARRAY}=<another name>, such as {request.array}-drill",
        )
    if not held:
        raise InvalidInputError(
            "targetInstanceId",
            f"{target} is not tagged {tags.ARRAY}; tag the drill instance "
            f"{tags.ARRAY}={request.array}-drill (raidsnap runs its documents only on instances "
            "so tagged)",
        )
    execution_id = call.execution.id
    name = RESTORE_NAME_PREFIX + hashlib.sha256(execution_id.encode()).hexdigest()[:40]
    machine = settings.restore_state_machine_arn
    restore_arn = machine.replace(":stateMachine:", ":execution:", 1) + ":" + name
    return Plan(
        array=request.array,
        setId=request.setId,
        targetInstanceId=target,
        mountPoint=request.mountPoint,
        mdDevice=request.mdDevice,
        trigger=request.trigger,
        execution=PlanExecution(id=execution_id, startTime=call.execution.startTime),
        restoreName=name,
        restoreExecutionArn=restore_arn,
        restoreInput=RestoreRequest(
            array=request.array,
            setId=request.setId,
            targetInstanceId=target,
            mode="attach",
            readOnly=True,
            mountPoint=request.mountPoint,
            mdDevice=request.mdDevice,
            initialization=request.initialization,
            newMdUuid=new_md_uuid(f"drill copy {execution_id}"),
        ),
    )
