"""The stack's deletion: turn off the FSR it keeps on, before what records it goes.

FSR is billed by the hour for each snapshot and zone while on. A fastRestore policy keeps it
on; deleting the stack deletes the schedules, the sweeper and the lock table that records the
claims, so nothing would ever turn it off. The sweeper's function is therefore also the
provider of a custom resource (lib/constructs/sweeper.ts): CloudFormation invokes it with a
Create, Update or Delete request and waits for the answer at the request's ResponseURL.
Create and Update do nothing and keep one physical id (a new id would make CloudFormation send
the old one a Delete). A Delete acts only while the stack itself is being deleted: an update
that removes the resource sends one too.

The resource DependsOn every state machine of the stack, and the schedules and rules that start
runs DependOn it (CloudFormation Template Reference, DependsOn attribute: a resource is deleted
before the resources it depends on), so by the Delete nothing starts a run any more and the
state machines are still there to ask. A run still RUNNING then (a restore with FSR on, a
backup about to keep FSR for its new set) would enable or keep FSR after the clean-up looked,
and DeleteStateMachine terminates it with no failure path: the answer is FAILED, naming the
runs, and nothing is turned off, so deleting the stack again once they have ended does it all.
Otherwise the sweep runs with no array keeping FSR; whatever stays on (a pair EC2 refused)
makes the answer FAILED, naming it, rather than leave FSR billed unseen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from raidsnap.aws import executions, stacks
from raidsnap.environment import SweeperSettings
from raidsnap.errors import ConfigurationError
from raidsnap.models import Contract
from raidsnap.observability import logger
from raidsnap.text import counted

PHYSICAL_ID = "raidsnap-fsr-off-when-the-stack-is-deleted"
# The answer's Reason: CloudFormation shows it in the stack's events (the body is at most
# 4096 bytes: CloudFormation User Guide, custom resource response).
REASON_CHARS = 3000


class Swept(Protocol):
    """What a sweep (raidsnap.workflows.sweeper.Sweep) turned off, and what it left."""

    fsr_disabled: list[str]
    kept_sets_disabled: list[str]
    refused: list[str]
    kept_notes: list[str]


# sweeper.sweep(lock table, restore execution prefix, arrays whose policy keeps FSR)
Sweeper = Callable[[str, str, frozenset[str]], Swept]


class StackRequest(Contract):
    """CloudFormation's request to the custom resource (the fields the answer needs)."""

    RequestType: str
    ResponseURL: str
    StackId: str
    RequestId: str
    LogicalResourceId: str


class StackAnswer(Contract):
    Status: str
    Reason: str
    PhysicalResourceId: str
    StackId: str
    RequestId: str
    LogicalResourceId: str


def answer(event: Mapping[str, object], settings: SweeperSettings, sweep: Sweeper) -> StackAnswer:
    """CloudFormation's request, as the handler got it: validated, done, answered."""
    return answer_stack(StackRequest.model_validate(event), settings, sweep)


def answer_stack(request: StackRequest, settings: SweeperSettings, sweep: Sweeper) -> StackAnswer:
    """Do what the request asks, and put the answer where CloudFormation waits for it."""
    status, reason = "SUCCESS", "nothing to do"
    try:
        if request.RequestType == "Delete" and stacks.deleting(request.StackId):
            status, reason = _turn_everything_off(settings, sweep)
    except Exception as err:
        logger.exception("the clean-up of the stack's deletion failed")
        status, reason = "FAILED", f"raidsnap's clean-up failed: {type(err).__name__}: {err}"
    answer = StackAnswer(
        Status=status,
        Reason=reason[:REASON_CHARS],
        PhysicalResourceId=PHYSICAL_ID,
        StackId=request.StackId,
        RequestId=request.RequestId,
        LogicalResourceId=request.LogicalResourceId,
    )
    stacks.respond(request.ResponseURL, answer.dump())
    return answer


def _turn_everything_off(settings: SweeperSettings, sweep: Sweeper) -> tuple[str, str]:
    if not settings.state_machines:
        raise ConfigurationError("STATE_MACHINE_ARNS names no state machine to ask about runs")
    runs = [arn for sm in settings.state_machines for arn in executions.running(sm)]
    if runs:
        return "FAILED", (
            f"raidsnap turned nothing off: {counted('run', runs)} still running, which may "
            "enable or keep Fast Snapshot Restore after a clean-up now. Wait for them to end "
            "(or stop them), then delete the stack again"
        )
    result = sweep(settings.lock_table, settings.restore_executions, frozenset())
    turned = (
        f"turned off FSR of {len(result.fsr_disabled)} pairs of ended restores and of "
        f"{len(result.kept_sets_disabled)} sets a fastRestore policy kept"
    )
    left = [*result.refused, *result.kept_notes]
    if not left:
        return "SUCCESS", turned
    return "FAILED", (
        f"{turned}, but FSR stays on (and billed) for: {'; '.join(left)}. Delete the stack "
        "again, or turn it off by hand (aws ec2 disable-fast-snapshot-restores) and delete the "
        "stack retaining this resource"
    )
