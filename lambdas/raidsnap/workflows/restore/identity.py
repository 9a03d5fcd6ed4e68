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
from raidsnap.aws import instances, snapshot_sets, tagging
from raidsnap.plan.devices import new_md_uuid
from raidsnap.plan.md_choice import uuid_key
from raidsnap.workflows.restore.contracts import Plan

__all__ = ["follow_on_instance", "live_md_uuid", "new_md_uuid"]


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


def follow_on_instance(plan: Plan, new_uuid: str) -> str:
    """Point the target's ``raidsnap:array:<array>`` at the restored array's md UUID when it
    named the array by another md UUID: only this array's tag, only on the target (the instance
    the array now runs on, which holds it by its tags), never for a read-only copy (the live
    array stays the one its backups take). A tag naming a mount point still names the array
    and is left alone. Returns the note saying what changed ("" when nothing did); raises
    ClientError when the tag could not be written."""
    if plan.readOnly or not new_uuid:
        return ""
    _, target_tags = instances.instance_facts(plan.targetInstanceId)
    key, value = tags.array_key(plan.array), tags.array_selector(target_tags, plan.array)
    if not value or value.startswith("/") or uuid_key(value) == uuid_key(new_uuid):
        return ""
    tagging.add([plan.targetInstanceId], key, new_uuid)
    return (
        f"tagged {plan.targetInstanceId} {key}={new_uuid} (it named {value}): backups of "
        f"{plan.array} take the restored array"
    )
