"""Handing a set to the stack of another Region or account to be copied there: its copy
workflow is started with the set as recorded here (the source side of a copy)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any, Literal

from botocore.exceptions import ClientError

from raidsnap import clients
from raidsnap.aws import error_code
from raidsnap.copy_places import CopyDestination

# Execution names: 1 to 80 characters, and with logging enabled only 0-9, A-Z, a-z, - and _
# (Step Functions API reference, StartExecution ``name``).
_NAME_CHARS = re.compile(r"[^0-9A-Za-z_-]")


def run_name(set_id: str, source: str) -> str:
    """The copy run's name: the set id made legal, and a digest of the set and where it comes
    from. The same set handed over again (a retried step) gets the same name, so Step Functions
    starts it once (a running execution of that name and input is answered as started)."""
    digest = hashlib.sha256(f"{set_id}|{source}".encode()).hexdigest()[:16]
    return f"{_NAME_CHARS.sub('_', set_id)[:63]}-{digest}"


# What makes a copy impossible to start there, whatever the retries: no stack there (or another
# name), a role this stack may not assume, or one that may not start it.
_NOT_STARTED = frozenset(
    {"StateMachineDoesNotExist", "AccessDenied", "AccessDeniedException", "InvalidArn"}
)


class NotStartedError(Exception):
    """The destination's copy workflow could not be started (its code and EC2's message)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def _states(destination: CopyDestination, session: str) -> Any:
    if destination.role_arn:
        return clients.in_account(
            "stepfunctions", destination.region, destination.role_arn, session
        )
    return clients.stepfunctions(destination.region)


def start(destination: CopyDestination, name: str, request: str) -> str:
    """Start the destination's copy workflow with ``request`` (JSON); its execution ARN. Started
    before (a retried step): the run of that name, whether it still runs or has ended."""
    try:
        answer = _states(destination, name).start_execution(
            stateMachineArn=destination.state_machine_arn, name=name, input=request
        )
    except ClientError as err:
        code = error_code(err)
        if code in _NOT_STARTED:
            message = str(err.response.get("Error", {}).get("Message", ""))
            raise NotStartedError(code, message) from None
        if code != "ExecutionAlreadyExists":
            raise
        return destination.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{name}"
    return str(answer["executionArn"])


# What makes a started copy run impossible to look at, whatever the retries: the role here may no
# longer be assumed or may not describe it (a stack there redeployed or deleted, a service
# control policy), or the run is gone (ExecutionDoesNotExist).
_NOT_FOLLOWED = _NOT_STARTED | {"ExecutionDoesNotExist"}


class NotFollowedError(Exception):
    """The destination's copy run can no longer be looked at (its code and the message)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def look(destination: CopyDestination, execution_arn: str) -> dict[str, Any]:
    """The copy run as Step Functions describes it (status, output, error, cause)."""
    session = execution_arn.rsplit(":", 1)[-1]
    try:
        states = _states(destination, session)
        return dict(states.describe_execution(executionArn=execution_arn))
    except ClientError as err:
        code = error_code(err)
        if code in _NOT_FOLLOWED:
            message = str(err.response.get("Error", {}).get("Message", ""))
            raise NotFollowedError(code, message) from None
        raise


def share(snapshot_ids: Iterable[str], account: str, *, add: bool) -> None:
    """Let ``account`` (not) create volumes from, and so copy, these snapshots of this account
    (ModifySnapshotAttribute, createVolumePermission: "Share an Amazon EBS snapshot")."""
    operation: Literal["add", "remove"] = "add" if add else "remove"
    for snapshot_id in sorted(set(snapshot_ids)):
        try:
            clients.ec2().modify_snapshot_attribute(
                SnapshotId=snapshot_id,
                Attribute="createVolumePermission",
                OperationType=operation,
                UserIds=[account],
            )
        except ClientError as err:
            # Unsharing a snapshot retention deleted meanwhile has nothing left to do.
            if add or error_code(err) != "InvalidSnapshot.NotFound":
                raise
