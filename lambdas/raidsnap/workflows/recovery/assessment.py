"""Is a member of the array impaired? The evidence an alarm-started recovery needs before it
replaces an array: its members' EBS status checks (DescribeVolumeStatus), members that are no
longer attached, and what the instance reports of the array (discover). What counts as evidence
is plan.evidence's; this module gathers it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime

from raidsnap import tags
from raidsnap.aws import commands, instances, snapshot_sets, volumes
from raidsnap.aws.health import tags_of_existing, volume_statuses
from raidsnap.models import Poll
from raidsnap.plan.evidence import (
    arrays_of_set,
    failed_members,
    md_evidence,
    redundant,
    replace_commands,
    serving_degraded,
    unchecked_members,
    volume_status_evidence,
)
from raidsnap.plan.set_facts import SetFacts
from raidsnap.plan.volumes import VolumeView
from raidsnap.workflows.recovery.contracts import Degraded, FailedMember, Look

DISCOVER_TIMEOUT_SECONDS = 120
# The assessment is on the recovery's critical path and discovery answers in a few seconds: the
# first look comes after 1 s, each later one twice as late, up to 5 s apart.
FIRST_POLL_SECONDS = 1
POLL_SECONDS = 5


def latest_set(array: str, reference: datetime) -> SetFacts | None:
    found = snapshot_sets.latest_complete(array)
    if found is None:
        return None
    return SetFacts.at(found.set_id, found.start_time, reference)


def volume_evidence(volume_ids: list[str]) -> list[str]:
    return volume_status_evidence(volume_statuses(volume_ids))


def start(array: str, instance_id: str, discover_document: str) -> Look:
    """First look: EC2's view of the members; then discovery on the instance, if it answers.

    The evidence is about the array as it is now. Where a restore put the array on this
    instance after the newest set was taken (a replace, or a recovery that moved it here), its
    members are that restore's volumes: the set's source volumes are volumes the array has left
    (kept after a replace, or left behind on an instance that was terminated, where they
    survive as available volumes), and their absence here is no evidence."""
    facts = snapshot_sets.latest_complete(array)
    members = sorted({m.volume_id for m in facts.members}) if facts else []
    attached = {a.volume_id for a in instances.describe_instance(instance_id).attachments}
    restored = _restored_members(array, attached)
    md_uuid = facts.tag_values.get(tags.MD_UUID) if facts else None
    if restored and not set(members) & attached:
        evidence = _restore_missing(instance_id, restored)
        # That restore gave the array its own md UUID: the one discovery must find.
        md_uuid = _restored_md_uuid(restored) or md_uuid
    else:
        evidence = [
            f"member {vid} of set {facts.set_id if facts else '?'} is no longer attached to "
            f"{instance_id}"
            for vid in _missing(instance_id, [v for v in members if v not in attached])
        ]
    checked = sorted((set(members) & attached) | set(restored))
    look = Look(
        array=array,
        instanceId=instance_id,
        checked=checked,
        evidence=_named(array, evidence + volume_evidence(checked)),
        mdUuid=md_uuid,
        mdLevel=facts.tag_values.get(tags.MD_LEVEL) if facts else None,
    )
    if not instances.agent_online(instance_id):
        return _unseen(look).decided(discovery="the SSM agent is not online")
    command_id = commands.send(
        discover_document,
        instance_id,
        {"ArrayName": array},
        comment=f"raidsnap recovery assessment {array}",
        timeout=DISCOVER_TIMEOUT_SECONDS,
    )
    poll = Poll(FIRST_POLL_SECONDS, DISCOVER_TIMEOUT_SECONDS + 30)
    return look.model_copy(update={"commandId": command_id, "status": "pending", **poll.as_dict()})


def _restored_members(array: str, attached: set[str]) -> dict[str, Mapping[str, str]]:
    """Attached volumes restored from a set of this array, with their tags: a restore since the
    set was taken replaced its members (tagged replaced-by) with these, so they are the members
    now."""
    own_set = re.compile(rf"^{re.escape(array)}-\d{{8}}T\d{{6}}Z-")
    found = tags_of_existing(sorted(attached))
    return {
        v: t
        for v, t in found.items()
        if own_set.match(str(t.get(tags.RESTORED_FROM, ""))) and not tags.is_copy(t)
    }


def _restored_md_uuid(restored: Mapping[str, Mapping[str, str]]) -> str | None:
    """The md UUID the restore that made the array here tagged its volumes with, once
    assembled (one value, else none)."""
    found = {t.get(tags.MD_UUID, "") for t in restored.values()}
    found.discard("")
    return found.pop() if len(found) == 1 else None


def _restore_missing(instance_id: str, restored: Mapping[str, Mapping[str, str]]) -> list[str]:
    """Members of the restore that made the array on this instance (its volumes share one
    restore execution and run) that are no longer attached here: a volume of that run that is
    detached, or a member slot of it that no attached volume fills."""
    found = restored
    runs = {
        (t.get(tags.RESTORE_EXECUTION, ""), t.get(tags.RESTORE_RUN, "")) for t in found.values()
    }
    out = []
    for execution, run in sorted(runs):
        if not (execution and run):
            continue
        ours = volumes.created_by(execution, run)
        for vid, view in sorted(ours.items()):
            if vid in restored or tags.REPLACED_BY in view.tags:
                continue
            slot = view.tags.get(tags.RESTORED_MEMBER_INDEX, "?")
            out.append(
                f"member {vid} (slot {slot}) of the array restored by {execution} is no longer "
                f"attached to {instance_id}"
            )
        out += _empty_slots(execution, ours)
    return out


def _empty_slots(execution: str, ours: dict[str, VolumeView]) -> list[str]:
    """Slots of the restored set that no volume of the restore fills any more (one was
    deleted)."""
    set_ids = {v.tags.get(tags.RESTORED_FROM, "") for v in ours.values()} - {""}
    if len(set_ids) != 1:
        return []
    (set_id,) = set_ids
    array = next(iter(ours.values())).tags.get(tags.ARRAY, "")
    # The array's recorded sets (one Query: the step reads manifests by array only).
    listed = snapshot_sets.list_sets(array) if array else []
    found = next((x for x in listed if x.set_id == set_id), None)
    if found is None or not found.member_count:
        return []
    filled = {v.tags.get(tags.RESTORED_MEMBER_INDEX) for v in ours.values()}
    return [
        f"slot {slot} of the array restored by {execution} has no volume any more"
        for slot in range(found.member_count)
        if str(slot) not in filled
    ]


def _missing(instance_id: str, not_attached: list[str]) -> list[str]:
    """Set members not attached here that are missing from the array. One attached to another
    instance belongs to another copy of the array (the one it left when a recovery moved it
    here, or a drill's); one a restore replaced is not missing either."""
    old_tags = tags_of_existing(not_attached)
    elsewhere = {
        vid
        for vid, view in volumes.describe(not_attached).items()
        if any(i != instance_id and st != "detached" for i, _d, st in view.attachments)
    }
    return [
        vid
        for vid in not_attached
        if vid not in elsewhere and tags.REPLACED_BY not in old_tags.get(vid, {})
    ]


def poll(look: Look) -> Look:
    """Later looks: what discovery reports of the array."""
    result = commands.fetch(str(look.commandId), str(look.instanceId))
    if result.status == "pending":
        left = Poll(int(look.waitSeconds or 0), int(look.budgetSeconds or 0)).waited()
        if not left.spent:
            later = min(POLL_SECONDS, 2 * left.wait_seconds)
            return look.model_copy(
                update={"budgetSeconds": left.budget_seconds, "waitSeconds": later}
            )
        return _unseen(look).decided(
            budgetSeconds=left.budget_seconds, discovery="discovery did not answer in time"
        )
    report = result.result or {}
    if result.status == "failed" or not report.get("ok"):
        return _unseen(look).decided(discovery=f"discovery failed ({result.detail})")
    found = arrays_of_set(report, look.mdUuid, set(look.checked or []))
    evidence = look.evidence + _named(look.array, _discovered(look, found))
    serving = [md for md in found if serving_degraded(md)]
    if evidence and found and len(serving) == len(found):
        return look.decided(discovery="done", evidence=evidence, degraded=_degraded(look, serving))
    return look.decided(discovery="done", evidence=evidence)


def _impaired(look: Look) -> list[str]:
    return [v for v in look.checked or [] if any(v in e for e in look.evidence)]


def _degraded(look: Look, serving: list[dict[str, object]]) -> Degraded:
    """What md still serves, which members failed, and the commands that replace them."""
    md = serving[0]
    failed = failed_members(md, _impaired(look))
    device = str(md.get("device") or "/dev/md0")
    return Degraded(
        device=device,
        level=str(md.get("level") or ""),
        failed=[FailedMember.model_validate(f) for f in failed],
        commands=replace_commands(device, failed),
    )


def _unseen(look: Look) -> Look:
    """The instance could not be asked. A redundant array (its set's level) may still be served
    by md with the impaired member failed: a recovery does not roll it back on EC2's word alone."""
    if not (look.evidence and redundant(look.mdLevel)):
        return look
    return look.model_copy(
        update={
            "degraded": Degraded(
                level=look.mdLevel,
                seen=False,
                failed=[FailedMember(volumeId=v) for v in _impaired(look)],
            )
        }
    )


def _named(array: str | None, lines: list[str]) -> list[str]:
    """Evidence lines that say which array they are about (an instance may hold several, and
    one attached-EBS alarm watches them all)."""
    return [f"{array}: {line}" for line in lines] if array else lines


def _discovered(look: Look, found: list[dict[str, object]]) -> list[str]:
    if not found:
        return [
            f"no md array of the set's members (md UUID {look.mdUuid}) is assembled on the instance"
        ]
    out = []
    for md in found:
        out += md_evidence(md)
        out += volume_evidence(unchecked_members(md, set(look.checked or [])))
    return out
