"""Backup, first steps: validate the input, hold the array against restores, find the instance,
discover the array's members on it."""

from __future__ import annotations

from raidsnap import sets
from raidsnap.aws import commands, homes, instances, kept_fsr, lock
from raidsnap.copy_places import copies_by_array
from raidsnap.environment import (
    BackupSettings,
    Documents,
    fast_restore_arrays,
    restore_lock_table,
    retention_for,
)
from raidsnap.errors import ConfigurationError
from raidsnap.hooks import Hooks, SetConsistency, hooks_for
from raidsnap.models import (
    BackupInput,
    Consistency,
    ExecutionRef,
    Poll,
    parse_input,
    system_directory,
)
from raidsnap.observability import logger
from raidsnap.workflows.backup import times, together
from raidsnap.workflows.backup.contracts import (
    Degraded,
    DiscoveryLook,
    Member,
    Members,
    MembersCall,
    PartMembers,
    Plan,
    PrepareCall,
    RunExecution,
)

DISCOVERY_POLL_SECONDS = 3


def _hold_seconds(settings: BackupSettings) -> int:
    """How long a backup's hold lasts at most if the run dies without letting go: discovery,
    the freeze, and the steps from here to the end of the snapshot step (ResolveMembers,
    Freeze, PollFreeze, TakeSnapshotSet) at their worst, every retry the workflow gives each on
    ThrottledError and Lambda's errors at its longest wait and every attempt at its function's
    timeout (the stack computes it from the Retry it deploys: lib/constructs/backup-workflow.ts
    heldStepsSeconds). A shorter hold runs out while a throttled step before the snapshots is
    still retried, and a restore let in then replaces the members under the backup about to
    snapshot them. A failed run lets go at once (release_hold); only a run stopped by hand
    leaves its hold to run out."""
    if settings.snapshot_step_seconds <= 0:
        raise ConfigurationError(
            "SNAPSHOT_STEP_SECONDS (the longest time to the snapshot step's end, set by "
            "the stack) is missing: the backup's hold against restores cannot be sized"
        )
    return (
        settings.discovery_timeout_seconds
        + settings.max_freeze_seconds
        + settings.snapshot_step_seconds
    )


def release_hold(plan: Plan) -> bool:
    """Let restores of the array run again (the snapshots are taken, or the run failed); True
    when this run held the array."""
    table = restore_lock_table()
    if not (table and plan.hold):
        return False
    for array in [plan.array, *(p.array for p in plan.takeWith)]:
        lock.release_backup(table, array, plan.execution.arn)
    return True


def prepare(call: PrepareCall, documents: Documents, settings: BackupSettings) -> Plan:
    """Validate the input, find the instance, and start discovery on it if its agent is up."""
    request = parse_input(BackupInput, call.input)
    # The hooks a run names are resolved before anything is held or sent: a name the
    # configuration does not give fails the run here, having changed nothing.
    hooks = hooks_for(request.array, request.hooks)
    named = together.others(request, hooks)
    together.check_room(request, named, settings.max_freeze_seconds)
    table = restore_lock_table()
    # An array of another instance is refused before anything is held or sent.
    together.check_homes(table, request.array, named)
    if not table:
        plan = _prepare(request, hooks, call.execution, documents, settings)
        return _with_others(plan, named, table, settings)
    # Before anything reaches the instance: a restore of any of these arrays that is running
    # refuses the backup (RestoreInProgress), and a restore that starts later sees the hold.
    arn = call.execution.id
    release = together.hold_all(table, [request.array, *named], arn, _hold_seconds(settings))
    try:
        plan = _prepare(request, hooks, call.execution, documents, settings)
        plan = _with_others(plan.model_copy(update={"hold": True}), named, table, settings)
    except Exception:
        release()
        raise
    return plan


def _with_others(plan: Plan, named: list[str], table: str | None, settings: BackupSettings) -> Plan:
    if not named:
        return plan
    return together.extend_plan(
        plan, named, table, lambda array: retention_for(array, settings.default_retention)
    )


def _prepare(
    request: BackupInput,
    hooks: Hooks | None,
    execution: ExecutionRef,
    documents: Documents,
    settings: BackupSettings,
) -> Plan:
    notes: list[str] = []
    instance = homes.array_instance(restore_lock_table(), request.array, notes)
    started = times.parse_time(execution.startTime or times.iso(times.now()))
    set_id = sets.make_set_id(request.array, started, execution.id)
    logger.append_keys(array=request.array, set_id=set_id)
    plan = Plan(
        array=request.array,
        consistency=request.consistency or "crash",
        hooks=hooks,
        trigger=request.trigger,
        retention=retention_for(request.array, settings.default_retention),
        execution=RunExecution(arn=execution.id, startTime=times.iso(started)),
        setId=set_id,
        instanceId=instance.instance_id,
        availabilityZone=instance.availability_zone,
        # A skipped discovery waits 0 s: the workflow goes from Prepare to WaitForDiscovery
        # without asking first (a Choice would be one more billed transition per backup).
        discovery=DiscoveryLook(status="skipped", reason="SSM agent is not online", waitSeconds=0),
        notes=notes,
    )
    copies = [d.id for d in copies_by_array().get(request.array, [])]
    if copies:  # set only where the array is copied: the workflow's copy step runs for these
        plan = plan.model_copy(update={"copies": copies})
    if _keeps_fsr(request.array):  # set only where the workflow's KeepFsr step has work
        plan = plan.model_copy(update={"fastRestore": True})
    agent = instances.agent(instance.instance_id)
    if not agent.online:
        return plan
    if agent.too_old:
        # Discovery cannot run safely (the script would get no parameters): members come from
        # the volume tags, and a freeze cannot run either (see collect_members).
        skipped = DiscoveryLook(status="skipped", reason=agent.too_old_reason(), waitSeconds=0)
        return plan.model_copy(update={"discovery": skipped, "agentTooOld": agent.version})
    command_id = commands.send(
        documents.discover,
        instance.instance_id,
        {"ArrayName": request.array},
        comment=f"raidsnap discover {request.array}",
        timeout=settings.discovery_timeout_seconds,
    )
    poll = Poll(DISCOVERY_POLL_SECONDS, settings.discovery_timeout_seconds)
    started_look = DiscoveryLook(
        status="pending",
        commandId=command_id,
        waitSeconds=poll.wait_seconds,
        budgetSeconds=poll.budget_seconds,
    )
    return plan.model_copy(update={"discovery": started_look})


def _keeps_fsr(array: str) -> bool:
    """Whether KeepFsr has work after this backup: the array has a fastRestore policy, or its
    policy's claim still holds sets (a policy removed since: KeepFsr turns their FSR off)."""
    if array in fast_restore_arrays():
        return True
    table = restore_lock_table()
    return bool(table and kept_fsr.read(table, array).sets)


def collect_members(call: MembersCall) -> Members:
    """Members from the discover report, or from volume tags where discovery cannot tell."""
    plan, discovery = call.plan, call.discovery
    instance = instances.describe_instance(plan.instanceId)
    layout: instances.Layout | None = None
    note = discovery.reason or ""
    if discovery.status == "pending":
        waiting, layout, note = _look_at_discovery(plan, discovery, instance)
        if waiting is not None:
            return Members(discovery=waiting)
    if layout is None:
        layout = instances.members_from_tags(plan.array, instance, note or "no discovery")
        logger.warning("members from volume tags", extra={"reason": layout.note})
    notes: list[str] = list(plan.notes)
    if layout.without_slot:
        notes.append(
            f"not members (spares, or members md marked faulty): {', '.join(layout.without_slot)}"
        )
    degraded = None
    if layout.degraded:
        # The set is still taken: what the working members hold is better than nothing, and
        # an operator may need it. It is marked degraded and never restored as latest.
        degraded = Degraded(
            missingSlots=list(layout.missing_slots), withoutSlot=list(layout.without_slot)
        )
        logger.warning(
            "the array is degraded; its set will be marked degraded",
            extra={"missing_slots": layout.missing_slots, "without_slot": layout.without_slot},
        )
    found = Members(
        discovery=DiscoveryLook(status="done", source=layout.source, note=layout.note),
        members=[
            Member(index=m.index, volumeId=m.volume_id, device=m.device) for m in layout.members
        ],
        md=layout.md,
        memberCount=layout.member_count,
        degraded=degraded,
        consistency=_consistency(plan, str(layout.md.get("mountPoint") or ""), notes),
        notes=notes,
    )
    if not plan.takeWith:
        return found
    ran = layout.source == "discovery" and discovery.commandId
    others = together.members(plan, instance, str(discovery.commandId) if ran else None, note)
    return _frozen_together(plan, found, others)


def _frozen_together(plan: Plan, found: Members, others: list[PartMembers]) -> Members:
    """Each array taken with the plan's gets the consistency it can have (its own mount point
    and hooks decide; a note says why it is less than asked); the arrays whose freeze document
    runs (to freeze, or to run hooks), the one with hooks first, then in name order."""
    notes = list(found.notes)
    parts = []
    for part, planned in zip(others, plan.takeWith, strict=True):
        said: list[str] = []
        own = plan.model_copy(update={"hooks": planned.hooks})
        consistency = _consistency(own, part.mount_point(), said)
        notes += [f"{part.array}: {n}" for n in said]
        parts.append(part.model_copy(update={"consistency": consistency}))
    each = {plan.array: found.consistency, **{p.array: p.consistency for p in parts}}
    order = sorted(
        (a for a, c in each.items() if c in ("fsfreeze", "application")),
        key=lambda a: (each[a] != "application", a),
    )
    return found.model_copy(update={"together": parts, "notes": notes, "freezes": order})


def _consistency(plan: Plan, mount_point: str, notes: list[str]) -> SetConsistency:
    """The consistency the set can have: ``application`` when hooks run (on an agent that can
    run the freeze document, at a mount point it takes); a freeze the instance cannot do falls
    back to crash, and ``notes`` says why."""
    filesystem = _filesystem(plan, mount_point, notes)
    # Only a pre hook holds the application at the snapshot instant; a post hook alone does not.
    if plan.hooks is None or not plan.hooks.preSnapshot:
        return filesystem
    if filesystem == "fsfreeze" or (plan.consistency == "crash" and _can_hook(plan, mount_point)):
        return "application"
    notes.append("the application hooks were not run: the set is " + filesystem)
    return filesystem


def _can_hook(plan: Plan, mount_point: str) -> bool:
    return not plan.agentTooOld and bool(mount_point) and not system_directory(mount_point)


def _filesystem(plan: Plan, mount_point: str, notes: list[str]) -> Consistency:
    if plan.consistency != "fsfreeze":
        return plan.consistency
    if plan.agentTooOld:
        # The freeze document cannot run on this agent; a crash-consistent set is what the
        # design takes when the instance cannot help (as with discovery), and it says why.
        notes.append(
            f"fsfreeze was asked for but the SSM agent of {plan.instanceId} is version "
            f"{plan.agentTooOld}, older than {instances.ENV_VAR_MIN_AGENT_VERSION}: the freeze "
            "document cannot run there, so the set is crash-consistent; update the agent"
        )
    elif not mount_point:
        notes.append(
            "fsfreeze was asked for but the mount point is unknown; the set is crash-consistent"
        )
    elif system_directory(str(mount_point)):
        # The freeze document refuses system directories (and /srv, /home... themselves), as
        # restores do: the set is still taken, crash-consistent.
        notes.append(
            f"the array is mounted at {mount_point}, a directory raidsnap does not freeze; "
            "the set is crash-consistent"
        )
    else:
        return "fsfreeze"
    return "crash"


def _look_at_discovery(
    plan: Plan, discovery: DiscoveryLook, instance: instances.ArrayInstance
) -> tuple[DiscoveryLook | None, instances.Layout | None, str]:
    """(the discovery to wait for again, the layout discovery found, why it found none)."""
    command_id = str(discovery.commandId)
    result = commands.fetch(command_id, plan.instanceId)
    if result.status == "pending":
        # Budgets count the time the workflow has waited, not the wall clock, so a retried
        # or redriven step does not shorten them.
        poll = Poll.of(discovery.model_dump()).waited()
        if not poll.spent:
            return discovery.model_copy(update=poll.as_dict()), None, ""
        commands.cancel(command_id, plan.instanceId)
        return None, None, "discovery did not finish in time"
    if result.status == "failed":
        return None, None, f"discovery failed ({result.detail}: {result.stderr_tail(3)})"
    if result.result is None:
        return None, None, "discovery printed no report"
    layout = instances.members_from_discovery(plan.array, instance, result.result)
    return None, layout, "" if layout is not None else "discovery found no md array"
