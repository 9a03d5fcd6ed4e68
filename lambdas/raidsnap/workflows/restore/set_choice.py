"""Restore: which set a request restores ("latest" or the id given), or why none can be."""

from __future__ import annotations

from raidsnap.aws import snapshot_sets
from raidsnap.errors import (
    IncompleteSnapshotSetError,
    InvalidInputError,
    SnapshotSetNotFoundError,
)
from raidsnap.models import RestoreInput
from raidsnap.sets import SnapshotSet
from raidsnap.text import counted, degraded_because
from raidsnap.workflows.restore import absent


def resolve_set(request: RestoreInput, notes: list[str]) -> SnapshotSet:
    if request.setId == "latest":
        listed = snapshot_sets.list_sets(request.array)
        # The stack's own sets come first: one the Recycle Bin would make whole is said before
        # any copy of another origin is considered.
        absent.refuse_local_binned(listed)
        every = snapshot_sets.one_origin(listed)
        refuse_two_arrays(request.array, listed, every)
        if len(every) < len(listed):
            notes.append(
                f"{len(listed) - len(every)} sets of {request.array} here are of another origin "
                "(taken here, or copied from another Region or account) than those "
                '"latest" chose among: give a setId to restore one of them'
            )
        complete = [s for s in every if s.complete]
        if not complete:
            raise absent.no_complete_set(request.array, every)
        found = snapshot_sets.latest_restorable(every)
        absent.note_newer_binned(every, found or complete[-1], notes)
        if found is None:
            # Only sets without an md UUID: the newest, which plan.volumes.md_uuid refuses
            # (InvalidInput on mdUuid, naming what to give) unless the input names the UUID.
            return complete[-1]
        newer = snapshot_sets.newer_without_md_uuid(every, found)
        if newer and not request.mdUuid:
            notes.append(
                f"restored {found.set_id}, the newest set that recorded its md UUID; the newer "
                f"sets {', '.join(s.set_id for s in newer)} were taken from the volume tags "
                "while the "
                "SSM agent was offline and recorded none: to restore one of them instead, give "
                "its setId and mdUuid"
            )
        elif newer:
            found = newer[-1]
        return found
    found = snapshot_sets.get_set(request.array, request.setId)
    if found is None or found.array != request.array:
        where = f" (its snapshots are tagged with array {found.array})" if found else ""
        raise SnapshotSetNotFoundError(
            f"no snapshot set {request.setId} of array {request.array}{where}; "
            'give an existing set id or "latest"'
        )
    if not found.complete:
        absent.refuse_binned(found)
        raise IncompleteSnapshotSetError(why_incomplete(found))
    return found


def refuse_two_arrays(array: str, listed: list[SnapshotSet], every: list[SnapshotSet]) -> None:
    """``latest`` chose copies (no complete set taken here), and copies of another origin hold
    another array of that name (another md UUID): which one the request means is not for
    ``latest`` to guess."""
    chosen = {s.md_uuid for s in every if s.restorable}
    if not chosen or not every or not every[0].origin:
        return
    origin = every[0].origin
    others = {
        (s.origin, s.md_uuid)
        for s in listed
        if s.origin and s.origin != origin and s.restorable and s.md_uuid not in chosen
    }
    if not others:
        return
    held = "; ".join(
        f"from {o} (md UUID {u})" for o, u in sorted({(origin, u) for u in chosen} | others)
    )
    raise InvalidInputError(
        "setId",
        f'"latest" cannot choose: {array} here holds copies of more than one array of that '
        f"name ({held}). Give the setId of the set to restore (`raidsnap sets {array}` lists "
        "them with their origin and md UUID); nothing was changed",
    )


def why_incomplete(s: SnapshotSet) -> str:
    m = s.manifest
    if m is None:
        return (
            f"set {s.set_id} of {s.array} is not in raidsnap's set table, though its snapshots "
            "carry raidsnap's tags. If the table was lost or is new, record the array's sets "
            f"again from their tags with `raidsnap sets adopt {s.array}` (it shows what it "
            "would record, and refuses a set whose tags disagree), then restore again. Nothing "
            "was changed"
        )
    problems = []
    if m.degraded:
        problems.append(
            f"the array was degraded when it was taken ({degraded_because(m.missing_slots)})"
        )
    if m.status != "taken":
        problems.append("its backup never finished recording it")
    if s.missing:
        problems.append(f"no snapshot of {counted('member', s.missing)} of {m.member_count}")
    for x in s.members:
        if x.state != "completed":
            problems.append(f"snapshot {x.snapshot_id} (member {x.index}) is {x.state}")
    return (
        f"set {s.set_id} of {s.array} is incomplete and is never restored: "
        + "; ".join(problems or ["it is not complete"])
        + '. Restore another set, or "latest"'
    )
