"""Restore: the md identities a run deals with.

A restored array gets an md UUID of its own (assemble's NewMdUuid, mdadm --update=uuid), so an
old member of the set's array, attached again later, can never be taken into it at a boot. The
run chooses it before the assemble document runs, so that a retried or repeated assemble with
the same parameters finds the array already under it.

A replace releases the array on the target as it is now, which after an earlier restore is not
the set's identity but that restore's: found from what raidsnap recorded of the volumes attached
there (a set taken from them, whose discovery read the live UUID; else the md UUID the restore
that created them tagged them with once assembled).
"""

from __future__ import annotations

from raidsnap import tags
from raidsnap.aws import instances, snapshot_sets
from raidsnap.plan.devices import new_md_uuid

__all__ = ["live_md_uuid", "new_md_uuid"]


def live_md_uuid(array: str, target: instances.ArrayInstance) -> str:
    """The md UUID of ``array`` as it is on ``target`` now, or "" when nothing recorded says
    (the set's own identity is then the one to expect)."""
    attached = {a.volume_id for a in target.attachments} - {target.boot_volume_id or ""}
    if not attached:
        return ""
    newest_first = sorted(snapshot_sets.list_sets(array), key=lambda s: s.start_time, reverse=True)
    for found in newest_first:
        recorded = found.tag_values.get(tags.MD_UUID, "")
        if recorded and {m.volume_id for m in found.members} & attached:
            return recorded
    restored = {
        t.get(tags.MD_UUID, "")
        for t in instances.volume_tags(sorted(attached)).values()
        if t.get(tags.ARRAY) == array
        and t.get(tags.RESTORED_FROM)
        and t.get(tags.MD_UUID)
        and not tags.is_copy(t)
    }
    return restored.pop() if len(restored) == 1 else ""
