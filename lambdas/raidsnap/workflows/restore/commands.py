"""Restore: start the release, assemble or prewarm document on the target (CommandPoll
follows it)."""

from __future__ import annotations

import math

from raidsnap.aws import commands
from raidsnap.environment import RestoreDocuments
from raidsnap.models import Poll
from raidsnap.plan import restore_time
from raidsnap.workflows.restore.contracts import CommandCall, CommandRun, Plan, Volumes

COMMAND_POLL_SECONDS = 2
# The assemble's end is the moment the array is mounted and usable, what a recovery waits to
# report: seen within a second (three state transitions a look, a few cents a thousand runs).
ASSEMBLE_POLL_SECONDS = 1
ASSEMBLE_TIMEOUT_SECONDS = 600
RELEASE_TIMEOUT_SECONDS = 300
PREWARM_TIMEOUT_SECONDS = 172800


def send_command(call: CommandCall, documents: RestoreDocuments) -> CommandRun:
    """Start the release, assemble or prewarm document on the target."""
    plan, step = call.plan, call.step
    ids = ",".join(call.volumes.ids if call.volumes else [])
    wait = COMMAND_POLL_SECONDS
    fail_on_error = True
    predicted: int | None = None
    if step == "release":
        document, timeout = documents.release, RELEASE_TIMEOUT_SECONDS
        # With the md UUID: release refuses, changing nothing, whatever other array the
        # device holds.
        params = {
            "MdDevice": plan.mdDevice,
            "MountPoint": plan.mountPoint,
            "MdUuid": plan.releaseMdUuid,
            "OwnMountPoint": _true_false(plan.ownMountPoint),
        }
    elif step == "assemble":
        document, timeout = documents.assemble, ASSEMBLE_TIMEOUT_SECONDS
        wait = ASSEMBLE_POLL_SECONDS
        params = {
            "VolumeIds": ids,
            "MdUuid": plan.mdUuid,
            # The restored array's own identity: no old member can ever join it.
            "NewMdUuid": plan.newMdUuid,
            "MdDevice": plan.mdDevice,
            "MountPoint": plan.mountPoint,
            "OwnMountPoint": _true_false(plan.ownMountPoint),
            "ReadOnly": "true" if plan.readOnly else "false",
            # A read-only copy (a drill, a look at older data) is temporary: recording it in
            # mdadm.conf and fstab would bring it back at boot and outlive its teardown.
            "Persist": "false" if plan.readOnly else "true",
        }
    elif step == "prewarm":
        document, timeout = documents.prewarm, PREWARM_TIMEOUT_SECONDS
        chosen = call.volumes.prewarmVolumeIds if call.volumes else None
        params = {"VolumeIds": ",".join(chosen) if chosen else ids, "Method": "auto"}
        predicted = prewarm_seconds(plan, params["VolumeIds"].split(","), call.volumes)
        # A prewarm that fails leaves a usable array whose first reads are slow: say so, but
        # do not throw away a restored array for it.
        fail_on_error = False
    else:
        raise ValueError(f"unknown command step {step!r}")
    target = plan.targetInstanceId
    command_id = commands.send(
        document, target, params, comment=f"raidsnap restore {plan.setId}", timeout=timeout
    )
    poll = Poll(wait, timeout)
    recorded = commands.record(
        command_id, target, document, poll, fail_on_error=fail_on_error, predicted_seconds=predicted
    )
    return CommandRun.model_validate(recorded)


def prewarm_seconds(plan: Plan, volume_ids: list[str], volumes: Volumes | None) -> int:
    """How long the prewarm of these members is predicted to read, as the restore-time model
    says (raidsnap.plan.restore_time.read_seconds: each member at its own throughput, together
    within the target's EBS bandwidth): when the restore first expects it done and looks
    closely (the looks follow that prediction: models.wait_toward_end)."""
    init = plan.initialization
    bw = (
        restore_time.Bandwidth(init.ebsBaselineMibs, init.ebsMaximumMibs)
        if init.ebsBaselineMibs and init.ebsMaximumMibs
        else None
    )
    ids = volumes.ids if volumes else []
    chosen = set(volume_ids)
    shapes = [
        restore_time.MemberShape(
            m.sizeGib,
            restore_time.member_throughput(m.volumeType, m.throughput, m.sizeGib, m.iops),
        )
        for m in plan.members
        if m.index < len(ids) and ids[m.index] in chosen
    ]
    return max(1, math.ceil(restore_time.read_seconds(shapes, bw)))


def _true_false(value: bool) -> str:
    return "true" if value else "false"
