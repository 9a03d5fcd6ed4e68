"""Backup, middle steps: freeze and thaw the filesystem (fsfreeze consistency), take the set's
snapshots at once, and follow them until they complete."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from raidsnap import hooks
from raidsnap.aws import commands, instances, snapshot_group, snapshots, volumes
from raidsnap.environment import BackupSettings, Documents
from raidsnap.errors import SnapshotFailedError
from raidsnap.hooks import Hooks, SetConsistency
from raidsnap.models import Poll
from raidsnap.observability import count, for_array, publish_alone
from raidsnap.sets import SnapshotSet
from raidsnap.workflows.backup import freezes, times, together
from raidsnap.workflows.backup.contracts import (
    CheckCall,
    Command,
    CommandCall,
    Members,
    PartSnapshots,
    Plan,
    SnapshotCall,
    Snapshots,
)
from raidsnap.workflows.backup.prepare import release_hold

COMMAND_POLL_SECONDS = freezes.COMMAND_POLL_SECONDS
SNAPSHOT_POLL_MIN_SECONDS = 15
SNAPSHOT_POLL_MAX_SECONDS = 1800


def freeze_token(plan: Plan) -> str:
    """This run's name for its freeze: the thaw document ends a freeze only when given the token
    it was made with, so a failed run never thaws a freeze someone else holds."""
    return hashlib.sha256(f"freeze:{plan.execution.arn}".encode()).hexdigest()[:32]


def _hook_seconds(own: Hooks | None) -> int:
    return own.timeoutSeconds if own else 0


def hooks_of(plan: Plan, array: str | None) -> Hooks | None:
    """The hooks of the array a freeze or thaw is for: the plan's for its array (or a single
    array's run), an array taken with it its own."""
    if array is None or array == plan.array:
        return plan.hooks
    return next((p.hooks for p in plan.takeWith if p.array == array), None)


def send_freeze(call: CommandCall, documents: Documents, settings: BackupSettings) -> Command:
    # The hooks run in the freeze document around fsfreeze, or alone for a crash-consistent
    # set (Freeze=false); a pre hook that fails runs the post hook there too. With several
    # arrays (takeWith), each call freezes the next one (freezes.py) with that array's hooks.
    plan = call.plan
    target = freezes.next_target(call.members, plan.array, call.freeze)
    own = hooks_of(plan, target.array if target else None)
    timeout = settings.max_freeze_seconds + 60 + 2 * _hook_seconds(own)
    command = _start_command(
        documents.freeze,
        call,
        settings,
        mount_point=target.mount_point if target else call.members.mount_point(),
        timeout=timeout,
        fail_on_error=True,
        extra=hooks.document_parameters(own, freeze=plan.consistency == "fsfreeze"),
    )
    # The guard cannot thaw before the command was requested plus its bound: until then the
    # freeze is certain to hold (create_set compares the snapshots' start with this). Nor after
    # the command's time limit plus its bound: the agent ends the command by then
    # (SendCommand TimeoutSeconds), so fsfreeze -f came before.
    # The guard's deadline is whole seconds (freeze.sh counts from `date +%s`, rounded down), so
    # the certain bound counts from the request's second, not its fraction.
    requested = times.parse_time(str(command.requestedAt))
    bound = timedelta(seconds=settings.max_freeze_seconds)
    until = requested.replace(microsecond=0) + bound
    at_most = requested + timedelta(seconds=timeout) + bound
    # A later freeze of the run ends GROUP_GAP before the first one (freeze.sh caps its guard's
    # deadline at the latest other deadline of the run less the gap): both bounds follow.
    earlier = [c for c in freezes.commands(call.freeze) if c.frozenUntil and c.frozenAtMostUntil]
    if target and earlier:
        first_until = max(times.parse_time(str(c.frozenUntil)) for c in earlier)
        first_at_most = max(times.parse_time(str(c.frozenAtMostUntil)) for c in earlier)
        until = min(until, first_until - freezes.GROUP_GAP)
        at_most = min(at_most, first_at_most - freezes.GROUP_GAP)
    command = command.model_copy(
        update={"frozenUntil": times.iso(until), "frozenAtMostUntil": times.iso(at_most)}
    )
    return freezes.carried(command, call.freeze, target) if target else command


def send_thaw(call: CommandCall, documents: Documents, settings: BackupSettings) -> Command:
    """Thaw the array's mount point; with several frozen (takeWith), the next one in reverse
    freeze order after ``call.thaw``."""
    plan = call.plan
    target = freezes.next_target(call.members, plan.array, call.thaw, reverse=True)
    if target is None:
        return thaw_mount_point(call, documents, settings, call.members.mount_point(), plan.hooks)
    own = hooks_of(plan, target.array)
    command = thaw_mount_point(call, documents, settings, target.mount_point, own)
    return freezes.carried(command, call.thaw, target)


def thaw_mount_point(
    call: CommandCall,
    documents: Documents,
    settings: BackupSettings,
    mount_point: str,
    own: Hooks | None,
) -> Command:
    # A thaw's failure is tolerated (the guard thaws within its bound), but not while it owes
    # the post hook: unreported, the application may still be held (commands.poll). With several
    # arrays frozen, the thaw that runs the post hook waits on the instance for the others to
    # end, by their thaws or at the latest their guards (thaw.sh): up to MaxFreezeSeconds more.
    extra = hooks.document_parameters(own, freeze=False)
    owed = bool(own and own.postSnapshot)
    waits = settings.max_freeze_seconds if owed and len(call.members.freezes) > 1 else 0
    command = _start_command(
        documents.thaw,
        call,
        settings,
        mount_point=mount_point,
        timeout=120 + _hook_seconds(own) + waits,
        fail_on_error=False,
        extra={k: v for k, v in extra.items() if k in ("PostSnapshot", "HookSeconds")},
    )
    return command.model_copy(update={"postOwed": True}) if owed else command


def _start_command(
    document: str,
    call: CommandCall,
    settings: BackupSettings,
    *,
    mount_point: str,
    timeout: int,
    fail_on_error: bool,
    extra: dict[str, str],
) -> Command:
    plan = call.plan
    params = {
        "MountPoint": mount_point,
        "MaxFreezeSeconds": str(settings.max_freeze_seconds),
        "FreezeToken": freeze_token(plan),
    }
    params |= extra
    command_id, requested = commands.send_timed(
        document, plan.instanceId, params, comment=f"raidsnap {plan.setId}", timeout=timeout
    )
    poll = Poll(COMMAND_POLL_SECONDS, timeout)
    started = commands.record(
        command_id, plan.instanceId, document, poll, fail_on_error=fail_on_error
    )
    return Command.model_validate(started | {"requestedAt": times.iso(requested)})


def _layout(members: Members) -> instances.Layout:
    degraded = members.degraded
    return instances.Layout(
        members=tuple(
            instances.Member(index=m.index, volume_id=m.volumeId, device=m.device)
            for m in members.members
        ),
        source=str(members.discovery.source),
        md=dict(members.md),
        raid_devices=members.memberCount,
        missing_slots=tuple(degraded.missingSlots if degraded else ()),
        degraded=degraded is not None,
    )


def _label(consistency: str) -> SetConsistency:
    if consistency == "application":
        return "application"
    return "fsfreeze" if consistency == "fsfreeze" else "crash"


def _got(consistency: str, freeze: Command, holds: bool) -> str:
    """What the instance says it got: ``application`` only where freeze reports that the pre
    hook ran and the hook holds the application (never more than that)."""
    if consistency != "application":
        return consistency
    said = freeze.result if isinstance(freeze.result, dict) else {}
    if said.get("preSnapshot") == "ok" and holds:
        return consistency
    return "fsfreeze" if said.get("frozen") is True else "crash"


def guard_deadline(freeze: Command) -> datetime | None:
    """The earliest the freeze guard may thaw (and run the post hook): MaxFreezeSeconds after
    fsfreeze -f, which follows the pre hook, as freeze reports it (thawDeadline, on the
    instance's clock, whole seconds rounded down). AWS's clock bounds it (send_freeze): not
    before the command was requested plus the bound, not after its time limit plus the bound.
    Without the report, the earlier of these."""
    if not freeze.frozenUntil:
        return None
    floor = times.parse_time(freeze.frozenUntil)
    said = freeze.result if isinstance(freeze.result, dict) else {}
    reported = said.get("thawDeadline")
    if not isinstance(reported, str) or not freeze.frozenAtMostUntil:
        return floor
    try:
        deadline = times.parse_time(reported)
    except ValueError:
        return floor
    return max(floor, min(deadline, times.parse_time(freeze.frozenAtMostUntil)))


def create_set(call: SnapshotCall) -> Snapshots:
    if call.plan.takeWith:
        return _create_together(call)
    plan, members, freeze = call.plan, call.members, call.freeze
    consistency = _got(
        members.consistency or plan.consistency, freeze, hooks.holds_application(plan.hooks)
    )
    instance = instances.describe_instance(plan.instanceId)
    layout = _layout(members)
    facts = volumes.raw([m.volume_id for m in layout.members])
    frozen_until = guard_deadline(freeze) if consistency in ("fsfreeze", "application") else None
    taken = snapshots.create_set(
        array=plan.array,
        set_id=plan.setId,
        execution_arn=plan.execution.arn,
        started=times.parse_time(plan.execution.startTime),
        instance=instance,
        layout=layout,
        consistency=consistency,
        volume_facts=facts,
        frozen_until=frozen_until,
    )
    result = Snapshots(
        setId=taken.snapshot_set.set_id,
        consistency=_label(taken.consistency),
        notes=list(taken.notes),
        status="pending",
        waitSeconds=SNAPSHOT_POLL_MIN_SECONDS,
        ids=[m.snapshot_id for m in taken.snapshot_set.by_index()],
        polls=0,
        waitedSeconds=0,
    )
    for_array(plan.array)
    count("SnapshotSetsStarted")
    return result


def _create_together(call: SnapshotCall) -> Snapshots:
    """The plan's array and the takeWith arrays in one CreateSnapshots call, a set each."""
    plan = call.plan
    instance = instances.describe_instance(plan.instanceId)
    parts = together.parts(plan, call.members, call.freeze, _layout)
    facts = volumes.raw([m.volume_id for p in parts for m in p.layout.members])
    taken = snapshot_group.create_sets(
        parts=parts,
        execution_arn=plan.execution.arn,
        started=times.parse_time(plan.execution.startTime),
        instance=instance,
        volume_facts=facts,
    )
    main = taken[plan.array]
    rest = [
        PartSnapshots(
            array=p.array,
            setId=taken[p.array].snapshot_set.set_id,
            consistency=_label(taken[p.array].consistency),
            ids=[m.snapshot_id for m in taken[p.array].snapshot_set.by_index()],
            notes=list(taken[p.array].notes),
        )
        for p in plan.takeWith
    ]
    for_array(plan.array)
    count("SnapshotSetsStarted")
    for part in plan.takeWith:
        # In a document of its own: the invocation's metrics carry one Array dimension.
        publish_alone("SnapshotSetsStarted", 1, {"Array": part.array})
    return Snapshots(
        setId=main.snapshot_set.set_id,
        consistency=_label(main.consistency),
        notes=list(main.notes),
        status="pending",
        waitSeconds=SNAPSHOT_POLL_MIN_SECONDS,
        ids=[m.snapshot_id for m in main.snapshot_set.by_index()],
        polls=0,
        waitedSeconds=0,
        together=rest,
    )


def check_snapshots(call: CheckCall) -> Snapshots:
    """Completed, failed, or still going: and if going, how long to wait before looking again."""
    plan, snaps = call.plan, call.snapshots
    # The snapshots are taken (point in time) and the filesystem thawed by now.
    released = snaps.holdReleased or release_hold(plan)
    # With takeWith, every set the run took: the run completes when all of them have.
    taken = together.current(plan, snaps)
    for current in taken:
        _fail_if_failed(current)
    members = [m for current in taken for m in current.members]
    waited = snaps.waitedSeconds + snaps.waitSeconds
    progress = min(m.progress for m in members)
    update: dict[str, object] = {
        "polls": snaps.polls + 1,
        "waitedSeconds": waited,
        "progress": progress,
        "holdReleased": released,
    }
    if all(c.members for c in taken) and all(m.state == "completed" for m in members):
        update["status"] = "completed"
    else:
        # Wait what the slowest snapshot still seems to need, and a tenth more: each look is
        # three billed state transitions (Wait, this Task, the Choice), so looking once more
        # than needed costs more than a set found complete a little late. EBS reports whole
        # percents, rounded down, so the estimate errs long, not short.
        elapsed = max(1.0, float(waited))
        remaining = elapsed * (100 - max(1, progress)) / max(1, progress)
        update["waitSeconds"] = int(
            min(SNAPSHOT_POLL_MAX_SECONDS, max(SNAPSHOT_POLL_MIN_SECONDS, remaining * 1.1))
        )
    return snaps.model_copy(update=update)


def _fail_if_failed(current: SnapshotSet) -> None:
    failed = current.failed
    if failed:
        detail = "; ".join(
            f"member {m.index} ({m.volume_id}) snapshot {m.snapshot_id}: "
            f"{m.state_message or 'error'}"
            for m in failed
        )
        raise SnapshotFailedError(
            f"set {current.set_id} of {current.array} failed: {detail}. The set will never "
            "be restored; retention removes it once newer sets exist"
        )
