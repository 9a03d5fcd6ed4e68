"""Drill: run discovery on the drill instance, then check the copy against the set."""

from __future__ import annotations

from raidsnap import tags
from raidsnap.aws import commands, snapshot_sets
from raidsnap.environment import recovery_by_array
from raidsnap.errors import DrillVerificationFailedError
from raidsnap.models import Poll
from raidsnap.plan.volumes import recovery_mount_problem
from raidsnap.workflows.drill.contracts import (
    CheckCall,
    Command,
    DiscoverCall,
    DiscoveredArray,
    Plan,
    Verification,
)

COMMAND_POLL_SECONDS = 2
DISCOVER_TIMEOUT_SECONDS = 120


def verify_step(call: DiscoverCall | CheckCall, discover_document: str) -> Command | Verification:
    """The Discover and Verify tasks: send discover, or check what it found."""
    if isinstance(call, DiscoverCall):
        return send_discover(call.plan, discover_document)
    return verify(call)


def send_discover(plan: Plan, discover_document: str) -> Command:
    command_id = commands.send(
        discover_document,
        plan.targetInstanceId,
        {"ArrayName": plan.array},
        comment=f"raidsnap drill {plan.array}",
        timeout=DISCOVER_TIMEOUT_SECONDS,
    )
    return command(plan, command_id, discover_document, DISCOVER_TIMEOUT_SECONDS, True)


def command(
    plan: Plan, command_id: str, document: str, timeout: int, fail_on_error: bool
) -> Command:
    """What the poll step follows of a command sent to the drill instance."""
    poll = Poll(COMMAND_POLL_SECONDS, timeout)
    sent = commands.record(
        command_id, plan.targetInstanceId, document, poll, fail_on_error=fail_on_error
    )
    return Command.model_validate(sent)


def verify(call: CheckCall) -> Verification:
    """Is the array on the drill instance the set's array, assembled from exactly the restored
    volumes, mounted read-only at the drill mount point?"""
    plan = call.plan
    out = call.restore.output
    given = call.restore.input
    problems = []
    target = out.targetInstanceId if out else None
    if target != plan.targetInstanceId:
        problems.append(f"restored onto {target}, not the drill instance")
    md_device, mount_point = (out.mdDevice, out.mountPoint) if out else (None, None)
    if mount_point != plan.mountPoint or md_device != plan.mdDevice:
        problems.append(
            f"restored as {md_device} at {mount_point}, not {plan.mdDevice} at {plan.mountPoint}"
        )
    if given is None or given.readOnly is not True:
        problems.append("the restore was not asked to mount read-only")
    volume_ids = list(out.volumeIds) if out else []
    set_id = (out.setId if out else None) or ""
    found = snapshot_sets.get_set(plan.array, set_id) if set_id else None
    recorded = dict(found.tag_values) if found else {}
    set_uuid = recorded.get(tags.MD_UUID) or ((out.mdUuid if out else None) or "")
    copy_uuid = (out.newMdUuid if out else None) or plan.restoreInput.newMdUuid or ""
    fs_type = recorded.get(tags.FS_TYPE)
    seen = (call.discover.result.arrays if call.discover.result else None) or []
    md = next((a for a in seen if a.device == plan.mdDevice), None)
    if md is None:
        problems.append(f"discovery on {plan.targetInstanceId} finds no {plan.mdDevice}")
    else:
        problems += _copy_problems(md, plan, (set_uuid, copy_uuid), volume_ids, fs_type)
    if problems:
        raise DrillVerificationFailedError(
            f"set {set_id} of {plan.array} restored, but the copy on "
            f"{plan.targetInstanceId} is not right: " + "; ".join(problems)
        )
    warning = recovery_mount_problem(
        recorded.get(tags.MOUNT_POINT, ""), recovery_by_array().get(plan.array, {})
    )
    verification = Verification(
        setId=set_id,
        mdUuid=copy_uuid or set_uuid,
        filesystem=fs_type,
        members=len(volume_ids),
        readOnly=True,
    )
    if warning is None:
        return verification
    return verification.model_copy(
        update={"warnings": [f"automated recovery of {plan.array} would fail: {warning}"]}
    )


def _copy_problems(
    md: DiscoveredArray,
    plan: Plan,
    uuids: tuple[str, str],
    volume_ids: list[str],
    fs_type: str | None,
) -> list[str]:
    """What differs between the array discovery found at the drill's md device and the set:
    the copy must carry the identity the restore gave it, never the set's own."""
    problems = []
    set_uuid, copy_uuid = uuids
    if md.uuid == set_uuid:
        problems.append(f"md UUID is {md.uuid}, the set's own: the copy got no identity of its own")
    elif copy_uuid and md.uuid != copy_uuid:
        problems.append(f"md UUID is {md.uuid}, the restore gave it {copy_uuid}")
    # A device without a working slot (a spare, a faulty one) sorts last: it is no member, and
    # the restore created none such.
    ordered = sorted(md.members or [], key=lambda m: (m.slot is None, m.slot or 0))
    members = [m.volumeId for m in ordered]
    if members != volume_ids:
        problems.append(f"members are {members}, the restore created {volume_ids}")
    fs = md.filesystem.type if md.filesystem else None
    if fs_type and fs != fs_type:
        problems.append(f"filesystem is {fs}, the set records {fs_type}")
    if md.mountPoint != plan.mountPoint:
        problems.append(f"mounted at {md.mountPoint}, not {plan.mountPoint}")
    return problems
