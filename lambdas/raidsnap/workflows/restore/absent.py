"""Restore, when the set asked for cannot be had as it is: say what would make it whole.

Two causes have a fix a person can apply: snapshots of the set that were deleted into the
Recycle Bin (restore them from it), and sets raidsnap's table does not record because the table
was lost or is new (record them again from their tags with ``raidsnap sets adopt``)."""

from __future__ import annotations

from raidsnap.aws import recycle_bin, snapshot_sets
from raidsnap.environment import region
from raidsnap.errors import RaidsnapError, SnapshotSetNotFoundError, SnapshotsInRecycleBinError
from raidsnap.sets import SnapshotSet
from raidsnap.text import counted


def adopt_hint(array: str) -> str:
    """Why sets may be missing from the table, and the command that records them again; empty
    when no snapshot tagged with the array lies outside every recorded set."""
    loose = snapshot_sets.listing(array).unrecorded_ids
    if not loose:
        return ""
    return (
        f"{len(loose)} snapshots tagged with {array} are in no set raidsnap recorded: if its set "
        f"table was lost or is new, record those sets again from their tags with `raidsnap "
        f"sets adopt {array}` (it shows what it would record, and asks), then restore again"
    )


def _binned(s: SnapshotSet) -> dict[int, recycle_bin.Binned]:
    """Slot -> the recorded snapshot of a missing member, where it is in the Recycle Bin."""
    m = s.manifest
    if m is None or not s.missing:
        return {}
    wanted = {slot: m.snapshots[slot] for slot in s.missing if slot in m.snapshots}
    found = recycle_bin.binned(wanted.values())
    return {slot: found[sid] for slot, sid in wanted.items() if sid in found}


def _advice(s: SnapshotSet, binned: dict[int, recycle_bin.Binned]) -> str:
    ids = [b.snapshot_id for _, b in sorted(binned.items())]
    leaves = min((b.leaves for b in binned.values() if b.leaves is not None), default=None)
    until = f" (it deletes them for good from {leaves:%Y-%m-%d %H:%M} UTC)" if leaves else ""
    commands = "; ".join(
        f"aws ec2 restore-snapshot-from-recycle-bin --region {region()} --snapshot-id {sid}"
        for sid in ids
    )
    return (
        f"set {s.set_id} of {s.array} lacks {counted('member', sorted(binned))}: the "
        f"Recycle Bin holds {counted('snapshot', ids)}{until}. Restore them from it (they come "
        f"back with their tags): {commands}"
    )


def _in_bin(s: SnapshotSet, binned: dict[int, recycle_bin.Binned]) -> SnapshotsInRecycleBinError:
    return SnapshotsInRecycleBinError(
        f"{_advice(s, binned)}; then restore again. Nothing was changed"
    )


def refuse_binned(s: SnapshotSet) -> None:
    """A set that lacks members whose recorded snapshots are in the Recycle Bin."""
    binned = _binned(s)
    if binned:
        raise _in_bin(s, binned)


def refuse_local_binned(listed: list[SnapshotSet]) -> None:
    """No set taken here is complete, and one of them lacks members the Recycle Bin holds: the
    stack's own array waits there (say so, newest first), whatever copies of another origin
    there are. ``latest`` never falls back to a copy, perhaps of another array of that name,
    while the array's own sets can be brought back."""
    local = [s for s in listed if not s.origin]
    if any(s.complete for s in local):
        return
    for s in reversed(local):
        binned = _binned(s)
        if binned:
            raise _in_bin(s, binned)


def no_complete_set(array: str, every: list[SnapshotSet]) -> RaidsnapError:
    """``latest`` found no complete set: the newest set the Recycle Bin would make whole, else
    SnapshotSetNotFound with what the table may be missing."""
    for s in reversed(every):
        binned = _binned(s)
        if binned:
            return _in_bin(s, binned)
    detail = f"; its {len(every)} sets are all incomplete or failed" if every else ""
    hint = adopt_hint(array)
    return SnapshotSetNotFoundError(
        f"array {array} has no complete snapshot set to restore{detail}"
        + (f". {hint}" if hint else "")
    )


def note_newer_binned(every: list[SnapshotSet], chosen: SnapshotSet, notes: list[str]) -> None:
    """``latest`` restores ``chosen``; a newer set that lacks members only because they are in
    the Recycle Bin is said, with how to restore it instead."""
    for s in reversed(every):
        if s.start_time <= chosen.start_time:
            return
        binned = _binned(s)
        if binned:
            notes.append(
                f"restored {chosen.set_id}, the newest complete set; {_advice(s, binned)}; then "
                f"restore setId {s.set_id} to have the newer data"
            )
            return
