"""A restore's plan before it starts: what the run would do, computed by the code its first step
(Prepare) runs, with the settings the deployed Prepare function runs with, changing nothing.

raidsnap.workflows.restore.prepare.preview makes the plan Prepare would make (the same set,
target, refusals, volumes and initialization, with its estimate) without taking the lock or
recording anything. Its settings (the lock table, the default initialization, the arrays the
configuration names, the allowed mount points) are the Prepare function's environment, read with
lambda:GetFunctionConfiguration from the function the restore state machine's Prepare state
runs (states:DescribeStateMachine): the CLI never guesses a setting the run would see otherwise.
What the plan adds for a person: the set's age and consistency, the instance's name, and in
replace mode the volumes the release would take out of service (attached there, and named by
the array's records, as the run's own detach step looks for them).

The plan is read with the operator's credentials: besides starting the restore, they need what
Prepare reads (ec2:DescribeInstances, DescribeVolumes, DescribeSnapshots, DescribeInstanceTypes,
DescribeFastSnapshotRestores; ssm:DescribeInstanceInformation; dynamodb:GetItem and Query on the
lock and manifest tables with kms:Decrypt; servicequotas:GetServiceQuota when auto weighs FSR)
and lambda:GetFunctionConfiguration on the Prepare function. A plan that cannot be read is said
so, and the command asks whether to start without one."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import boto3

from raidsnap import tags
from raidsnap.aws import instances, snapshot_sets
from raidsnap.environment import RestoreSettings
from raidsnap.errors import RaidsnapError, public_name
from raidsnap.sets import SnapshotSet
from raidsnap.workflows.restore.contracts import Plan
from raidsnap.workflows.restore.prepare import preview

from .backends import Backend

PREPARE_STATE = "Prepare"
# The function's variables the plan takes over: raidsnap's own settings, not the runtime's.
_NOT_SETTINGS = ("AWS_", "POWERTOOLS_", "_")


class PlanUnavailableError(Exception):
    """The plan could not be computed (a permission, the stack); the message says why."""


class PlanRefusedError(Exception):
    """The run would refuse this input: its error name and cause, as the run would give them."""

    def __init__(self, error: RaidsnapError) -> None:
        super().__init__(str(error))
        self.name = public_name(type(error).__name__)
        self.field = str(getattr(error, "field", ""))
        self.cause = str(error)


@dataclass(frozen=True)
class Release:
    """Replace mode: the array released on the target, and the volumes that go with it."""

    md_device: str
    mount_point: str
    md_uuid: str
    members: tuple[str, ...]
    others: tuple[str, ...]


@dataclass(frozen=True)
class RestorePlan:
    plan: Plan
    snapshot_set: SnapshotSet | None
    taken: datetime
    consistency: str
    target_name: str
    release: Release | None


def prepare_function(backend: Backend) -> str:
    """The ARN of the function the restore state machine's Prepare state runs."""
    definition = backend.sfn.describe_state_machine(stateMachineArn=backend.arn("restore"))
    state = json.loads(definition["definition"]).get("States", {}).get(PREPARE_STATE, {})
    resource = str(state.get("Resource", ""))
    if resource.startswith("arn:") and ":lambda:" in resource and ":function:" in resource:
        return resource
    named = (state.get("Parameters") or {}).get("FunctionName")
    if named:
        return str(named)
    raise PlanUnavailableError(
        "the restore workflow's Prepare state names no Lambda function; is it raidsnap's?"
    )


def prepare_settings(backend: Backend) -> dict[str, str]:
    """The Prepare function's own settings (its environment variables)."""
    arn = prepare_function(backend)
    found = boto3.client("lambda").get_function_configuration(FunctionName=arn)
    variables = (found.get("Environment") or {}).get("Variables") or {}
    return {k: str(v) for k, v in variables.items() if not k.startswith(_NOT_SETTINGS)}


@contextlib.contextmanager
def settings_in_environment(variables: Mapping[str, str]) -> Iterator[None]:
    """The function's settings where raidsnap's modules read them (the environment), and its
    logger quiet (what it would warn of is in the plan's notes), until the block ends."""
    from raidsnap.observability import logger  # noqa: PLC0415 - binds its stream on import

    saved = {k: os.environ.get(k) for k in variables}
    level = logger.log_level
    os.environ.update(variables)
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def restore_plan(backend: Backend, payload: dict[str, Any]) -> RestorePlan:
    """The plan of the restore ``payload`` would start; PlanRefusedError when the run would
    refuse it (nothing started either way)."""
    backend.read_sets()
    variables = prepare_settings(backend)
    with settings_in_environment(variables):
        try:
            plan = preview(payload, RestoreSettings.from_env())
        except RaidsnapError as error:
            raise PlanRefusedError(error) from None
        found = snapshot_sets.get_set(plan.array, plan.setId)
        _, target_tags = instances.instance_facts(plan.targetInstanceId)
        release = _release(plan) if plan.mode == "replace" else None
    manifest = found.manifest if found is not None else None
    consistency = (
        manifest.consistency
        if manifest is not None
        else (found.tag_values.get(tags.CONSISTENCY, "crash") if found else "crash")
    )
    return RestorePlan(
        plan=plan,
        snapshot_set=found,
        taken=datetime.fromisoformat(plan.setTakenAt.replace("Z", "+00:00")),
        consistency=consistency,
        target_name=target_tags.get("Name", ""),
        release=release,
    )


def _slot(index: int | None, labels: dict[str, str]) -> int:
    """A member's slot: its set's record, else the slot a restore tagged it with; one not known
    sorts last."""
    if index is not None:
        return index
    tagged = labels.get(tags.RESTORED_MEMBER_INDEX, "")
    return int(tagged) if tagged.isdigit() else 1 << 30


def _release(plan: Plan) -> Release:
    """What a replace takes out of service on the target: the array at the plan's md device and
    mount point, and the attached volumes the array's records name (a volume a set of it was
    taken from, or one a restore of it created and tagged); the release document verifies them
    on the instance before anything is detached."""
    target = instances.describe_instance(plan.targetInstanceId)
    attached = sorted({a.volume_id for a in target.attachments} - {target.boot_volume_id or ""})
    # Each source volume's slot in the array, for an order a person reads (slot 0 first), the
    # same on every look: volume ids are random.
    sources = {m.volume_id: m.index for s in snapshot_sets.list_sets(plan.array) for m in s.members}
    labelled = instances.volume_tags(attached)
    members = sorted(
        (
            v
            for v in attached
            if v in sources
            or (labelled.get(v, {}).get(tags.ARRAY) == plan.array and not tags.is_copy(labelled[v]))
        ),
        key=lambda v: (_slot(sources.get(v), labelled.get(v, {})), v),
    )
    return Release(
        md_device=plan.mdDevice,
        mount_point=plan.mountPoint,
        md_uuid=plan.releaseMdUuid,
        members=tuple(members),
        others=tuple(v for v in attached if v not in members),
    )
