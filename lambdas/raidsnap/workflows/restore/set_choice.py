"""Restore: which set a request restores ("latest" or the id given), or why none can be."""

from __future__ import annotations

from raidsnap.aws import snapshot_sets
from raidsnap.errors import IncompleteSnapshotSetError, SnapshotSetNotFoundError
from raidsnap.models import RestoreInput
from raidsnap.sets import SnapshotSet
from raidsnap.workflows.restore import absent


def resolve_set(request: RestoreInput, notes: list[str]) -> SnapshotSet:
    if request.setId == "latest":
        every = snapshot_sets.list_sets(request.array)
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
            "the array was degraded when it was taken (slots "
            f"{', '.join(str(i) for i in m.missing_slots)} had no working member)"
        )
    if m.status != "taken":
        problems.append("its backup never finished recording it")
    if s.missing:
        problems.append(
            f"members {', '.join(str(i) for i in s.missing)} of {m.member_count} have no snapshot"
        )
    for x in s.members:
        if x.state != "completed":
            problems.append(f"snapshot {x.snapshot_id} (member {x.index}) is {x.state}")
    return (
        f"set {s.set_id} of {s.array} is incomplete and is never restored: "
        + "; ".join(problems or ["it is not complete"])
        + '. Restore another set, or "latest"'
    )
