"""Restore failure path, replace mode: the array the release document took out of service goes
back in service as it was, or the cause says exactly where it is and how to bring it back."""

from __future__ import annotations

from botocore.exceptions import ClientError
from pydantic import JsonValue

from raidsnap import tags
from raidsnap.aws import commands, error_code, tagging, volumes
from raidsnap.environment import RestoreDocuments
from raidsnap.models import Poll
from raidsnap.plan.volumes import VolumeView
from raidsnap.workflows.restore.commands import ASSEMBLE_TIMEOUT_SECONDS
from raidsnap.workflows.restore.contracts import Cleanup, Plan, PutBack, RestoreState

POLL_SECONDS = 5
# An old member attached again is usable within seconds (EBS attachment states, Amazon EBS User
# Guide "Attach an Amazon EBS volume to an instance"); past this the put-back gives up.
ATTACH_BUDGET_SECONDS = 300


def release_answer(state: RestoreState) -> dict[str, JsonValue] | None:
    """What the run's release document answered ({} when the run sent none, or it failed);
    None while it still runs. The run's state has it when the poll step read it; when that step
    failed (or crashed) after the document was sent, SSM is asked: the array may be out of
    service although the run never learned it."""
    r = state.release
    if r is None:
        return {}
    if r.status == "success":
        return dict(r.result or {})
    looked = commands.fetch(r.commandId, r.instanceId)
    if looked.status == "pending":
        return None
    return dict(looked.result or {}) if looked.status == "success" else {}


def released(plan: Plan | None, answer: dict[str, JsonValue] | None) -> bool:
    """Did this run's release document take the array out of service (stop its md device)?"""
    return bool(plan and plan.mode == "replace" and (answer or {}).get("stop") == "stopped")


def _released_members(answer: dict[str, JsonValue]) -> tuple[list[str], str | None]:
    """The members the release document stopped, in slot order; or why they cannot be put
    back as they were."""
    result = answer
    if result.get("memberLost"):
        return [], "a member's device was gone when the array was released"
    raw = result.get("members")
    members = [m for m in raw if isinstance(m, dict)] if isinstance(raw, list) else []
    slotted = [m for m in members if isinstance(m.get("slot"), int)]
    if not slotted or any(not m.get("volumeId") for m in slotted):
        return [], "the release document did not map every member to an EBS volume"
    ordered = sorted(slotted, key=lambda m: int(str(m["slot"])))
    return [str(m["volumeId"]) for m in ordered], None


def step(
    plan: Plan,
    state: RestoreState,
    answer: dict[str, JsonValue],
    pb: PutBack | None,
    documents: RestoreDocuments,
) -> PutBack:
    """One step of assembling the released array again from its old members (attached again
    first where this run had detached them), under its own md UUID, mounted where it was;
    ``failed`` when that cannot be done."""
    if pb is not None and pb.status != "pending":
        return pb
    if pb is None:
        return _start(plan, state, answer, documents)
    if pb.phase == "attach":
        return _follow_attach(plan, state, pb, documents)
    return _follow(plan, pb)


def _start(
    plan: Plan, state: RestoreState, answer: dict[str, JsonValue], documents: RestoreDocuments
) -> PutBack:
    """Attach again the old members this run detached; once all are attached, untag them and
    send the assemble document."""
    target = plan.targetInstanceId
    ids, why = _released_members(answer)
    if why is not None:
        return PutBack(status="failed", reason=why)
    views = volumes.describe(ids)
    gone = _not_attached(ids, target, views)
    if gone:
        return _reattach(plan, state, ids, gone, views)
    return _assemble(plan, state, ids, views, documents)


def _reattach(
    plan: Plan, state: RestoreState, ids: list[str], gone: list[str], views: dict[str, VolumeView]
) -> PutBack:
    """Attach the old members this run detached back to the target, each on the device it had
    (DetachOldMembers recorded it). Only a volume this run detached is attached: tagged
    replaced-by with this execution, attached to nothing, its device known; any other one
    (detached by someone else, attached elsewhere since) is not the run's to move."""
    target = plan.targetInstanceId
    devices = state.old.devices if state.old else {}
    failed = PutBack(status="failed", volumeIds=ids, detached=gone)
    ours = [
        vid
        for vid in gone
        if vid in views
        and views[vid].tags.get(tags.REPLACED_BY) == state.execution.id
        and all(a.state == "detached" for a in views[vid].attachments)
        and devices.get(vid)
    ]
    if ours != gone:
        others = [vid for vid in gone if vid not in ours]
        return failed.model_copy(
            update={"reason": f"old members {others} were detached, and not by this run"}
        )
    for vid in gone:
        try:
            volumes.attach(vid, target, devices[vid])
        except ClientError as err:
            return failed.model_copy(
                update={
                    "reason": f"old member {vid} could not be attached again to {target} "
                    f"as {devices[vid]} ({error_code(err)})"
                }
            )
    return PutBack(
        status="pending",
        phase="attach",
        volumeIds=ids,
        detached=gone,
        reattached=gone,
        budgetSeconds=ATTACH_BUDGET_SECONDS,
    )


def _follow_attach(
    plan: Plan, state: RestoreState, pb: PutBack, documents: RestoreDocuments
) -> PutBack:
    """One look at the old members attached again; once all are, the array is assembled."""
    views = volumes.describe(pb.volumeIds)
    if not _not_attached(pb.volumeIds, plan.targetInstanceId, views):
        sent = _assemble(plan, state, pb.volumeIds, views, documents)
        return sent.model_copy(update={"detached": pb.detached, "reattached": pb.reattached})
    poll = Poll(POLL_SECONDS, int(pb.budgetSeconds or 0)).waited()
    if poll.spent:
        return pb.model_copy(
            update={
                "status": "failed",
                "reason": f"old members {pb.reattached} did not attach again in time",
            }
        )
    return pb.model_copy(update={"budgetSeconds": poll.budget_seconds})


def _assemble(
    plan: Plan,
    state: RestoreState,
    ids: list[str],
    views: dict[str, VolumeView],
    documents: RestoreDocuments,
) -> PutBack:
    """With every old member attached: take off the tag this run put on them, and send the
    assemble document."""
    target = plan.targetInstanceId
    tagged = [v for v in ids if views[v].tags.get(tags.REPLACED_BY) == state.execution.id]
    if tagged:
        # Nothing replaced them: the tag this run put on them goes (only this run's value).
        tagging.remove(tagged, tags.REPLACED_BY, state.execution.id)
    params = {
        "VolumeIds": ",".join(ids),
        # The old members keep the identity they have: this is the user's own array back.
        "MdUuid": plan.releaseMdUuid,
        "NewMdUuid": plan.releaseMdUuid,
        "MdDevice": plan.mdDevice,
        "MountPoint": plan.mountPoint,
        # Where release found the array mounted: its own mount point.
        "OwnMountPoint": "true",
        "ReadOnly": "false",
        # mdadm.conf and fstab still name the array: release changed neither.
        "Persist": "false",
    }
    try:
        command_id = commands.send(
            documents.assemble,
            target,
            params,
            comment=f"raidsnap put back {plan.array}",
            timeout=ASSEMBLE_TIMEOUT_SECONDS,
        )
    except ClientError as err:
        return PutBack(
            status="failed",
            volumeIds=ids,
            reason=f"the assemble document could not be sent ({error_code(err)})",
        )
    return PutBack(
        status="pending",
        volumeIds=ids,
        commandId=command_id,
        budgetSeconds=ASSEMBLE_TIMEOUT_SECONDS + 30,
    )


def _follow(plan: Plan, pb: PutBack) -> PutBack:
    looked = commands.fetch(str(pb.commandId), plan.targetInstanceId)
    if looked.status == "pending":
        poll = Poll(POLL_SECONDS, int(pb.budgetSeconds or 0)).waited()
        if poll.spent:
            return pb.model_copy(
                update={"status": "failed", "reason": "the assemble document did not finish"}
            )
        return pb.model_copy(update={"budgetSeconds": poll.budget_seconds})
    if looked.status == "failed":
        answer = looked.result or {}
        return pb.model_copy(
            update={
                "status": "failed",
                "reason": f"assembling it failed: {answer.get('message') or looked.stderr_tail(2)}",
            }
        )
    return pb.model_copy(update={"status": "done"})


def _not_attached(ids: list[str], target: str, views: dict[str, VolumeView]) -> list[str]:
    """The volumes of ``ids`` that are not attached to ``target`` (per ``views``, EC2's)."""
    return [
        vid
        for vid in ids
        if vid not in views or (a := views[vid].on(target)) is None or a.state != "attached"
    ]


def _put_back(plan: Plan, pb: PutBack) -> str:
    """The array put back, in words: from which members, attached again or not."""
    md, mp = plan.mdDevice, plan.mountPoint
    which = "all" if set(pb.reattached) == set(pb.volumeIds) else ", ".join(pb.reattached)
    again = f" ({which} attached again on the devices they had)" if pb.reattached else ""
    return (
        f"the replace had released {md} (unmounted {mp}, stopped the array); it is put back: "
        f"assembled again from its old members {', '.join(pb.volumeIds)}{again} under md UUID "
        f"{plan.releaseMdUuid} and mounted at {mp}, as before the restore"
    )


def _where_now(ids: list[str], target: str) -> list[str]:
    """The old members not attached to ``target`` now (all of them when EC2 cannot be asked:
    the way back then includes attaching each, which fails harmlessly for one that is)."""
    try:
        return _not_attached(ids, target, volumes.describe(ids))
    except ClientError:
        return list(ids)


def old_array(state: RestoreState, c: Cleanup, left: list[str]) -> list[str]:
    """What became of the array the replace released, in words a person can act on: put back,
    or out of service with the exact way back (only where that way is safe: never while a
    volume of this run, which may carry the same md UUID until assembled, is still attached)."""
    plan = state.plan
    answer = c.release or {}
    if plan is None or not released(plan, answer):
        return []
    md, mp, uuid, target = plan.mdDevice, plan.mountPoint, plan.releaseMdUuid, plan.targetInstanceId
    pb = c.putBack
    if pb is not None and pb.status == "done":
        return [_put_back(plan, pb)]
    ids, _why = _released_members(answer)
    old = state.old.volumeIds if state.old else []
    # The members release named, and those the run detached (a lost member among them).
    ids = list(dict.fromkeys([*ids, *old]))
    out_of_service = (
        f"{md} of {plan.array} is not in service on {target}: the replace released it "
        f"(unmounted {mp}, stopped the array)"
        + (f" and could not put it back ({pb.reason})" if pb is not None and pb.reason else "")
    )
    ours = sorted(set(c.kept or []) | set(left))
    if ours:
        return [
            out_of_service + f". Its old members {ids} are intact. Do not attach or assemble "
            f"them while this run's volumes {ours} are attached to {target}: until assembled "
            f"they may carry the same md UUID {uuid}, and md could build the array from old "
            "and new members (silently losing writes); release and detach those first"
        ]
    devices = dict(state.old.devices) if state.old else {}
    # Where the old members are now, as EC2 says (a put-back may have attached some again).
    detached = _where_now(ids, target)
    steps = [
        f"aws ec2 attach-volume --volume-id {v} --instance-id {target} --device "
        f"{devices.get(v, '/dev/sd' + 'fghijklmnopqrstuvwxyz'[i % 21])}"
        for i, v in enumerate(detached)
    ]
    if detached:
        steps.append(
            f"aws ec2 delete-tags --resources {' '.join(detached)} --tags Key={tags.REPLACED_BY}"
        )
    paths = " ".join(
        f"/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_{v.replace('-', '')}" for v in ids
    )
    steps.append(f"on the instance: mdadm --assemble {md} --uuid={uuid} {paths}")
    steps.append(f"mount {md} {mp}")
    where = (
        f"its old members {detached} are detached, intact and kept (tagged {tags.REPLACED_BY})"
        if detached
        else f"its old members {ids} are still attached and intact"
    )
    return [
        out_of_service + f"; {where}. This run's volumes are deleted, so nothing else there "
        f"carries md UUID {uuid}. To bring it back: " + "; then ".join(steps)
    ]
