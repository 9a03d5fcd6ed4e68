"""Drill teardown: release the copy, then remove exactly the volumes its restore created.

Both steps run whatever step before them failed (the Catches lead here), so they read only the
plan, which exists once Prepare succeeded, and what the restore reported, which is empty when
it did not succeed. The restore's execution ARN is the plan's (the drill named that restore),
and its run nonce is asked of Step Functions: teardown removes only volumes tagged with both,
and of those only the ones the restore recorded creating (raidsnap.aws.created) or reported in
its output. Tags prove nothing: once the restore's volumes exist, anyone who may read their
tags and write tags could copy them onto a volume of their own.
"""

from __future__ import annotations

from raidsnap import tags
from raidsnap.aws import commands, created, lock, run_secret, volumes
from raidsnap.environment import restore_lock_table
from raidsnap.plan.cleanup import attached_to
from raidsnap.plan.volumes import VolumeView
from raidsnap.workflows.drill.contracts import (
    Command,
    Plan,
    ReleaseCall,
    RemoveCall,
    RestoreRun,
    Skipped,
    Teardown,
)
from raidsnap.workflows.drill.verify import command

RELEASE_TIMEOUT_SECONDS = 300
TEARDOWN_POLL_SECONDS = 5
# Teardown asks for a normal detach first, and forces it after this many looks (the copy was
# mounted read-only and released first, so nothing is lost by forcing).
TEARDOWN_FORCE_AFTER = 6
TEARDOWN_MAX_LOOKS = 120


def teardown_step(
    call: ReleaseCall | RemoveCall, release_document: str
) -> Command | Skipped | Teardown:
    """The Release and RemoveVolumes tasks."""
    if isinstance(call, ReleaseCall):
        return send_release(call.plan, call.restore, release_document)
    return remove_volumes(call.plan, call.restore, call.teardown)


def restore_arn(plan: Plan, restore: RestoreRun) -> str:
    return restore.executionArn or plan.restoreExecutionArn


def send_release(plan: Plan, restore: RestoreRun, release_document: str) -> Command | Skipped:
    """Release the copy on the drill instance whenever a volume of the drill's restore is
    attached there, whatever became of the restore: one preempted after assembly left the copy
    assembled and mounted, and every later drill on the host would find its md device busy."""
    arn = restore_arn(plan, restore)
    run = restore_run(arn)
    target = plan.targetInstanceId
    views = _its_own(restore, arn, run)
    attached = sorted(vid for vid, view in views.items() if attached_to(view, target))
    if not attached:
        return Skipped(status="skipped", reason=f"no volume of {arn} is attached to {target}")
    # The copy's own identity, as the restore gave it (its output, else its volumes' tag).
    md_uuid = (restore.output.newMdUuid if restore.output else None) or ""
    md_uuid = (
        md_uuid
        or views[attached[0]].tags.get(tags.MD_UUID, "")
        or plan.restoreInput.newMdUuid
        or ""
    )
    command_id = commands.send(
        release_document,
        target,
        {
            "MdDevice": plan.mdDevice,
            "MountPoint": plan.mountPoint,
            # The copy's own identity, so that release refuses whatever other array the drill's
            # md device might hold.
            "MdUuid": md_uuid,
        },
        comment=f"raidsnap drill teardown {plan.array}",
        timeout=RELEASE_TIMEOUT_SECONDS,
    )
    # A release that fails still lets teardown detach (and after a while force) the volumes.
    return command(plan, command_id, release_document, RELEASE_TIMEOUT_SECONDS, False)


def remove_volumes(plan: Plan, restore: RestoreRun, before: Teardown) -> Teardown:
    """Detach and delete the volumes the drill's restore created, and nothing else; called in
    a loop until none is left (or the looks run out)."""
    arn = restore_arn(plan, restore)
    run = before.run if before.run is not None else restore_run(arn)
    looks = before.looks + 1
    views = _its_own(restore, arn, run)
    # remove_created counts the detach requests and adds what it deleted in place.
    asks, deleted = dict(before.detachAsks), list(before.deleted)
    progress = {"detachAsks": asks, "deleted": deleted}
    pending = volumes.remove_created(views, arn, run, progress, force_after=TEARDOWN_FORCE_AFTER)
    more = bool(pending) and looks < TEARDOWN_MAX_LOOKS
    result = Teardown(
        run=run,
        looks=looks,
        detachAsks=asks,
        deleted=deleted,
        left=pending,
        status="pending" if more else "done",
    )
    if more:
        result.waitSeconds = TEARDOWN_POLL_SECONDS
    return result


def _its_own(restore: RestoreRun, arn: str, run: str) -> dict[str, VolumeView]:
    """The volumes tagged as the run's that it created: in its record, or in its output."""
    if not run:
        return {}
    table = restore_lock_table()
    known = set(restore.output.volumeIds if restore.output else [])
    known |= created.recorded(table, arn, run) if table else frozenset()
    return {vid: v for vid, v in volumes.created_by(arn, run).items() if vid in known}


def restore_run(restore_arn: str) -> str:
    """The run nonce of the drill's restore (its ARN and start time, as the restore derived it),
    or "" when that restore never started. Drill names, and with them their restores' names,
    may come again after 90 days: the ARN alone could name an earlier run."""
    started = lock.describe(restore_arn)[1]
    return run_secret.nonce(restore_arn, started) if started is not None else ""
