"""Backup of several arrays of one instance at one point in time (the input's ``takeWith``): the
plan's array and each named array are held, found and taken in one CreateSnapshots call
(raidsnap.aws.snapshot_group); each gets its own set, checked, kept and reported as its own.

With fsfreeze, every array's filesystem is frozen, one after the other, before the call and
thawed in reverse order after it (freezes.py); each set is labelled by what its own freeze gave.
One array of the group may have hooks (the input's for the plan's array, else the
configuration's): its freeze document runs first, so its pre hook runs before any filesystem is
frozen, and its thaw last, so its post hook runs once every other is thawed. Hooks on two arrays
are refused before anything is held: the second pre hook would run while the first array is
frozen, and the post hooks of a failed run would not run in order."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from raidsnap import sets
from raidsnap.aws import commands, homes, instances, lock, snapshot_group, snapshot_sets
from raidsnap.copy_places import copies_by_array
from raidsnap.environment import fast_restore_arrays
from raidsnap.errors import InvalidInputError, SnapshotFailedError
from raidsnap.hooks import Hooks, holds_application, hooks_for
from raidsnap.models import BackupInput
from raidsnap.sets import SnapshotSet
from raidsnap.text import listed
from raidsnap.workflows.backup import freezes, times
from raidsnap.workflows.backup.contracts import (
    Command,
    Degraded,
    Member,
    Members,
    PartMembers,
    PartOutput,
    PartPlan,
    Plan,
    Retention,
    RetentionCall,
    Snapshots,
)

FIELD = "takeWith"


def others(request: BackupInput, hooks: Hooks | None) -> list[str]:
    """The input's other arrays, checked: distinct, not the plan's own, one of them at most
    with hooks (``hooks``: the plan's array's), none with copies or a fastRestore policy."""
    named = list(request.takeWith or [])
    if not named:
        return []
    if request.array in named or len(set(named)) != len(named):
        raise InvalidInputError(FIELD, f"names {request.array} or another array twice: {named}")
    hooked = [request.array] if hooks is not None else []
    hooked += [a for a in named if hooks_for(a, None) is not None]
    if len(hooked) > 1:
        raise InvalidInputError(
            FIELD,
            f"{listed(sorted(hooked))} both have hooks (the input's or the configuration's); "
            "one array of those taken together may have hooks: give the run's hooks as {} "
            "or back the arrays up one by one",
        )
    _refuse_what_would_not_run(named)
    return sorted(named)


def check_room(request: BackupInput, named: Sequence[str], max_freeze_seconds: int) -> None:
    """Refuse an fsfreeze group that MaxFreezeSeconds cannot hold, before anything is held or
    sent: every later freeze ends 2 s before the first one (freeze.sh), so the last one would be
    refused with FreezeWindowClosed on every run (freezes.seconds_needed)."""
    if not named or request.consistency != "fsfreeze":
        return
    needed = freezes.seconds_needed(1 + len(named))
    if max_freeze_seconds < needed:
        raise InvalidInputError(
            FIELD,
            f"{1 + len(named)} arrays frozen one after the other need a MaxFreezeSeconds of at "
            f"least {needed} s (each freeze comes 3 s or more after the one before, ends 2 s "
            f"before the first one's guard and needs 10 s for the snapshots); "
            f"defaults.maxFreezeSeconds is "
            f"{max_freeze_seconds}: raise it, or take fewer arrays together",
        )


def _refuse_what_would_not_run(named: Sequence[str]) -> None:
    """A named array's copies and fastRestore policy run only for the array a backup is started
    for (the copy and KeepFsr steps read the plan's array): taken with another, its set would
    silently get neither. The synth check refuses the same in the configuration's takeWith
    (lib/take-with.ts checkTakeWith); a run's own takeWith is refused here."""
    copied = copies_by_array()
    kept = fast_restore_arrays()
    for array in sorted(named):
        places = [d.id for d in copied.get(array, [])]
        if places:
            what = f"has copies (to {', '.join(places)})"
        elif array in kept:
            what = "has a fastRestore policy"
        else:
            continue
        raise InvalidInputError(
            FIELD,
            f"{array} {what}, which run only for the array a backup is started for, so they "
            f"would not run for its set: back {array} up on its own, or start the backup for "
            f"{array} and take the others with it",
        )


def check_homes(table: str | None, array: str, named: Sequence[str]) -> None:
    """Refuse, before anything is held or sent, a named array that lives on another instance
    than ``array`` (a question only: no move is recorded)."""
    if not named:
        return
    home = homes.array_instance(table, array, [], record=False).instance_id
    for other in named:
        there = homes.array_instance(table, other, [], record=False).instance_id
        if there != home:
            raise InvalidInputError(FIELD, _elsewhere(other, there, array, home))


def _elsewhere(other: str, there: str, array: str, home: str) -> str:
    return (
        f"{other} is on {there}, not on {home} with {array}: only arrays of one instance are "
        "taken together; back them up one by one"
    )


def hold_all(table: str, arrays: Sequence[str], arn: str, seconds: int) -> Callable[[], None]:
    """Hold every array against restores, always in name order (two runs that hold the same
    arrays never wait on each other crosswise); returns what lets all of them go. A refusal
    lets go of those held before it."""
    held: list[str] = []

    def release() -> None:
        for array in reversed(held):
            lock.release_backup(table, array, arn)

    try:
        for array in sorted(arrays):
            lock.hold_for_backup(table, array, arn, seconds)
            held.append(array)
    except Exception:
        release()
        raise
    return release


def extend_plan(
    plan: Plan, named: Sequence[str], table: str | None, retention: Callable[[str], int]
) -> Plan:
    """Each named array's set id and retention; refused unless it lives on the plan's instance."""
    parts: list[PartPlan] = []
    notes = list(plan.notes)
    started = times.parse_time(plan.execution.startTime)
    for array in named:
        home = homes.array_instance(table, array, notes)
        if home.instance_id != plan.instanceId:
            raise InvalidInputError(
                FIELD, _elsewhere(array, home.instance_id, plan.array, plan.instanceId)
            )
        parts.append(
            PartPlan(
                array=array,
                setId=sets.make_set_id(array, started, plan.execution.arn),
                retention=retention(array),
                hold=plan.hold,
                hooks=hooks_for(array, None),
            )
        )
    return plan.model_copy(update={"takeWith": parts, "notes": notes})


def members(
    plan: Plan, instance: instances.ArrayInstance, discovery: str | None, note: str
) -> list[PartMembers]:
    """Each named array's members, from the report of the same discovery (``discovery``, its
    command: it lists every md array of the instance), else from its volume tags."""
    report = commands.fetch(discovery, plan.instanceId).result if discovery else None
    out: list[PartMembers] = []
    for part in plan.takeWith:
        layout = instances.members_from_discovery(part.array, instance, report) if report else None
        if layout is None:
            layout = instances.members_from_tags(part.array, instance, note or "no discovery")
        out.append(
            PartMembers(
                array=part.array,
                source=layout.source,
                members=[
                    Member(index=m.index, volumeId=m.volume_id, device=m.device)
                    for m in layout.members
                ],
                md=layout.md,
                memberCount=layout.member_count,
                degraded=Degraded(
                    missingSlots=list(layout.missing_slots),
                    withoutSlot=list(layout.without_slot),
                )
                if layout.degraded
                else None,
            )
        )
    return out


def parts(
    plan: Plan,
    found: Members,
    freeze: Command | None,
    layout: Callable[[Members], instances.Layout],
) -> list[snapshot_group.Part]:
    """The plan's array and each named array as one CreateSnapshots call takes them, each with
    the consistency its own freeze document gave (crash without one)."""
    main = _part(plan.array, plan.setId, found, freeze, plan.hooks, layout)
    rest = [
        _part(p.array, pp.setId, as_members(found, p), freeze, pp.hooks, layout)
        for p, pp in zip(found.together, plan.takeWith, strict=True)
    ]
    return [main, *rest]


def _part(  # noqa: PLR0917 - one array's facts, all needed to label its set
    array: str,
    set_id: str,
    found: Members,
    freeze: Command | None,
    hooks: Hooks | None,
    layout: Callable[[Members], instances.Layout],
) -> snapshot_group.Part:
    label, until = freezes.got(
        found.consistency, freezes.command_of(freeze, array), holds_application(hooks)
    )
    return snapshot_group.Part(array, set_id, layout(found), label, until)


def as_members(found: Members, part: PartMembers) -> Members:
    return Members(
        discovery=found.discovery,
        members=part.members,
        md=part.md,
        memberCount=part.memberCount,
        degraded=part.degraded,
        consistency=part.consistency or "crash",
    )


def current(plan: Plan, snaps: Snapshots) -> list[SnapshotSet]:
    """Every set the run took, as EC2 lists it now; a set gone is SnapshotFailed."""
    out: list[SnapshotSet] = []
    for array, set_id in [(plan.array, snaps.setId)] + [(p.array, p.setId) for p in snaps.together]:
        found = snapshot_sets.get_set(array, set_id)
        if found is None:
            raise SnapshotFailedError(f"the snapshots of set {set_id} of {array} no longer exist")
        out.append(found)
    return out


def part_call(call: RetentionCall, index: int) -> RetentionCall:
    """The run as one named array's own: its plan, members and set."""
    part, found, taken = (
        call.plan.takeWith[index],
        call.members.together[index],
        call.snapshots.together[index],
    )
    plan = call.plan.model_copy(
        update={
            "array": part.array,
            "setId": part.setId,
            "retention": part.retention,
            "takeWith": [],
        }
    )
    snaps = call.snapshots.model_copy(
        update={
            "setId": taken.setId,
            "consistency": taken.consistency,
            "ids": taken.ids,
            "notes": taken.notes,
            "together": [],
        }
    )
    # Its own notes only: what the plan's array's steps said (discovery's note among them, and
    # the notes _frozen_together already gave under this array's name) is the run's already.
    members = as_members(call.members, found)
    members = members.model_copy(
        update={"discovery": members.discovery.model_copy(update={"note": None})}
    )
    return RetentionCall(plan=plan, members=members, snapshots=snaps)


def notes(report: Retention) -> list[str]:
    """A named array's notes (its set's label, tags, retention) as the run's output gives them:
    each under the array's name."""
    return [f"{report.output.array}: {note}" for note in report.output.notes]


def output(report: Retention) -> PartOutput:
    """A named array's retention result as the output's ``together`` names it."""
    out = report.output
    return PartOutput(
        array=out.array,
        setId=out.setId,
        consistency=out.consistency,
        snapshotIds=out.snapshotIds,
        memberVolumeIds=out.memberVolumeIds,
        retention=out.retention,
        locks=out.locks,
    )
