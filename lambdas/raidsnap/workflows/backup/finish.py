"""Backup, last steps: retention and the output; a degraded array's run then fails; the failure
path thaws and lets go of the array."""

from __future__ import annotations

from raidsnap import aws
from raidsnap.aws import commands, in_use, snapshot_sets, snapshots
from raidsnap.environment import BackupSettings, Documents
from raidsnap.errors import ArrayDegradedError, cause_message, public_name
from raidsnap.models import Poll
from raidsnap.observability import count, for_array, logger, publish_alone
from raidsnap.plan import retention
from raidsnap.set_locks import HeldSet
from raidsnap.text import counted
from raidsnap.workflows.backup import freezes, locking, times, together
from raidsnap.workflows.backup.contracts import (
    BackupOutput,
    BackupState,
    Command,
    CommandCall,
    Failure,
    FailureCall,
    NotDeleted,
    Retention,
    RetentionCall,
    RetentionReport,
)
from raidsnap.workflows.backup.prepare import release_hold
from raidsnap.workflows.backup.snapshot import hooks_of, thaw_mount_point

# The output names at most this many unrecorded snapshots (the count says how many there are).
UNRECORDED_LISTED = 50
# How long ExplainFailure waits for the thaws of the arrays without a post hook before it sends
# the thaw that runs one, and how often it looks: within the BackupFailed function's 60 s
# timeout (lib/constructs/functions.ts), with time left to send that thaw and let go of the hold.
THAW_WAIT_SECONDS = 30
THAW_POLL_SECONDS = 2


def finish(call: RetentionCall) -> Retention:
    """Retention and the output, with their metrics; then a degraded array's run fails with
    ArrayDegraded. The array's lock policy runs first: its sets are locked before retention
    looks, and a policy that cannot lock fails the run before anything is deleted."""
    result = _keep(call)
    parts = [together.part_call(call, i) for i in range(len(call.plan.takeWith))]
    if parts:
        # Each array taken with the plan's keeps its own sets by its own policy; what its steps
        # had to say joins the run's notes under its name.
        kept = [_keep(part, alone=True) for part in parts]
        said = [note for report in kept for note in together.notes(report)]
        update = {
            "together": [together.output(r) for r in kept],
            "notes": result.output.notes + said,
        }
        result = Retention(output=result.output.model_copy(update=update))
    for each in [call, *parts]:
        fail_if_degraded(each)
    return result


def _keep(call: RetentionCall, *, alone: bool = False) -> Retention:
    """The array's lock policy, retention and their metrics: the invocation's for the plan's
    array, ``alone`` (a document of their own, its Array dimension) for one taken with it."""
    locks = locking.lock_newest(call)
    result = apply_retention(call)
    if locks is not None:
        result = Retention(output=result.output.model_copy(update={"locks": locks}))
    report = result.output.retention
    # Without the array dimension: one alarm watches every array (the output names the array).
    publish_alone("SnapshotsNotDeleted", len(report.notDeleted))
    outcome = "DegradedSetsTaken" if call.members.degraded else "BackupSucceeded"
    if alone:
        array = {"Array": call.plan.array}
        publish_alone("SnapshotsDeleted", report.deletedSnapshots, array)
        publish_alone(outcome, 1, array)
        return result
    for_array(call.plan.array)
    count("SnapshotsDeleted", report.deletedSnapshots)
    count(outcome)
    return result


def apply_retention(call: RetentionCall) -> Retention:
    """Keep the newest complete sets, delete the recorded snapshots of older ones, and leave
    every snapshot no set recorded alone (reported, never deleted)."""
    plan, members, taken = call.plan, call.members, call.snapshots
    array = plan.array
    found = snapshot_sets.listing(array)
    # Only the sets taken here: copies of another stack's array of this name are that copy
    # workflow's to keep (its retention, per source).
    sets = [s for s in found.sets if not s.origin]
    current = next((s for s in sets if s.set_id == taken.setId), None)
    now = current.start_time if current else max((s.start_time for s in sets), default=times.now())
    protected = in_use.sets_in_use(sets, times.now())
    decided = retention.plan(sets, plan.retention, protected, now)
    deletable, held = locking.held_back(decided.delete)
    deleted: list[str] = []
    refused: list[snapshots.Refusal] = []
    for s in deletable:
        logger.info(
            "retention deletes set",
            extra={"set_id": s.set_id, "reason": decided.reasons[s.set_id]},
        )
        gone, kept = snapshots.delete_set(s)
        deleted += gone
        refused += kept
    unrecorded = found.unrecorded_ids
    if unrecorded:
        logger.warning(
            "snapshots tagged with the array that no set of raidsnap recorded were left alone",
            extra={"array": array, "snapshots": unrecorded[:UNRECORDED_LISTED]},
        )
    for r in refused:
        logger.warning(
            "retention could not delete a snapshot",
            extra={"snapshot": r.snapshot_id, "code": r.code, "reason": r.message},
        )
    output = BackupOutput(
        array=array,
        setId=taken.setId,
        instanceId=plan.instanceId,
        consistency=taken.consistency,
        snapshotIds=[m.snapshot_id for m in (current.by_index() if current else [])],
        memberVolumeIds=[m.volumeId for m in members.members],
        discovery=members.discovery.source,
        notes=_notes(call, refused, held),
        retention=RetentionReport(
            keep=plan.retention,
            keptSets=[s.set_id for s in decided.keep],
            deletedSets=[s.set_id for s in deletable],
            deletedSnapshots=len(deleted),
            notDeleted=[
                NotDeleted(snapshotId=r.snapshot_id, code=r.code, message=r.message)
                for r in refused
            ],
            unrecordedSnapshots=unrecorded[:UNRECORDED_LISTED],
            unrecordedCount=len(unrecorded),
            heldSets=held,
        ),
    )
    return Retention(output=output)


def _failed_thaws(call: RetentionCall) -> list[str]:
    """A thaw that failed is tolerated (the set was taken; the freeze guard thaws within its
    bound), but said: its filesystem stayed frozen until then, and a post hook sent after it
    waited for that guard (thaw.sh) before it let the application go."""
    sent = freezes.commands(call.thaw)
    where = freezes.mount_points(call.members, call.plan.array)
    out = []
    for i, command in enumerate(sent):
        if command.status != "failed":
            continue
        mount = where.get(command.array or call.plan.array, "the array's mount point")
        said = command.result if isinstance(command.result, dict) else {}
        why = str(said.get("message") or command.stderrTail or "no detail")
        after = [c.array for c in sent[i + 1 :] if c.postOwed and c.array]
        hook = f"; the post hook of {after[0]} ran only after that" if after else ""
        out.append(
            f"the thaw of {mount} failed ({why}): it stayed frozen until its freeze guard "
            f"thawed it, at most MaxFreezeSeconds after its freeze{hook}"
        )
    return out


def _notes(call: RetentionCall, refused: list[snapshots.Refusal], held: list[HeldSet]) -> list[str]:
    """What the steps had to say, in the order they said it, then discovery's note, what
    retention could not delete and what locks hold."""
    notes = [*call.members.notes, *call.snapshots.notes, *_failed_thaws(call)]
    if call.members.discovery.note:
        notes.append(call.members.discovery.note)
    if refused:
        notes.append(
            f"retention could not delete {len(refused)} snapshots: "
            + "; ".join(f"{r.snapshot_id} ({r.code}: {r.message})" for r in refused[:5])
            + ". They stay until whatever holds them lets go (deregister the AMI, unlock the "
            "snapshot, or delete it from AWS Backup); the next backups try again"
        )
    if held:
        notes.append(
            f"retention kept {len(held)} older sets that snapshot locks hold: "
            + "; ".join(
                f"{h.setId} ({', '.join(h.lockStates)} until {h.until or 'unknown'})"
                for h in held[:5]
            )
            + ". Each goes at the first backup after its locks end (a compliance lock is "
            "never lifted early)"
        )
    return notes


def fail_if_degraded(call: RetentionCall) -> None:
    """A degraded array's backup ends in ArrayDegraded once its set is taken and retention has
    run, so that the run, and the operator, see it."""
    degraded = call.members.degraded
    if degraded is None:
        return
    plan = call.plan
    missing = degraded.missingSlots
    where = (
        f"md has no working member in {counted('slot', missing)} of {call.members.memberCount}"
        if missing
        else "md reports it degraded, though every slot has a member"
    )
    raise ArrayDegradedError(
        f"array {plan.array} on {plan.instanceId} is degraded: {where}"
        + (f" ({', '.join(degraded.withoutSlot)} hold no slot)" if degraded.withoutSlot else "")
        + f". Set {call.snapshots.setId} was taken of the working members and marked degraded; "
        "it is never restored as latest, and retention does not count it. Replace or re-add the "
        "failed member and let md resync; the next backup after that is complete again"
    )


def explain_failure(call: FailureCall, documents: Documents, settings: BackupSettings) -> Failure:
    """Thaw if we froze, let go of the array, then name the failure for the run's Fail state."""
    state = call.state
    error = state.error
    name = public_name(error.Error if error else "States.Runtime")
    cause = cause_message(error.Cause if error else "")
    # (with several arrays, the last thaw of the run's: none comes after it)
    thawed = (
        state.thaw is not None
        and not state.thaw.more
        and (state.thaw.status == "success" or (name == "HookFailed" and _unanswered(state.thaw)))
    )
    # A freeze that failed or was cancelled may still have frozen the filesystem: thaw is
    # harmless on a thawed one, so thaw whenever a freeze was attempted.
    if state.freeze is not None and state.freeze.status != "none" and not thawed:
        cause += _thaw_after_failure(state, documents, settings)
    if name == "HookFailed" and state.snapshots is not None:
        cause += _relabel_after_post_hook(state)
    # CheckSnapshots lets go once the snapshots are taken; a Prepare that failed let go itself.
    released = state.snapshots is not None and state.snapshots.holdReleased
    if state.plan is not None and not released:
        try:
            release_hold(state.plan)
        except Exception:  # its lease ends the hold anyway
            logger.exception("the backup's hold on the array could not be released")
    if state.plan is not None:
        for_array(state.plan.array)
    count("BackupFailed")
    return Failure(error=name, cause=cause)


def _unanswered(thaw: Command) -> bool:
    """The thaw had its whole time limit without an answer and was cancelled (commands.poll):
    another would wait on the same silent agent; the cause says where the post hook is kept."""
    if thaw.waitSeconds is None or thaw.budgetSeconds is None:
        return False
    return Poll(thaw.waitSeconds, thaw.budgetSeconds).waited().spent


def _thaw_after_failure(state: BackupState, documents: Documents, settings: BackupSettings) -> str:
    """Thaw what the run may have frozen: its array's mount point, or with several arrays
    (takeWith) every one it was to freeze; returns what the cause adds. The thaw that runs a
    post hook goes last, once the others ended: the hook must find every filesystem thawed."""
    try:
        # A freeze is sent only once the plan and the members exist: both are there.
        call = CommandCall.model_validate({"plan": state.plan, "members": state.members})
        targets = freezes.to_thaw_after_failure(
            call.members, call.plan.array, state.freeze, state.thaw
        )
        mounts = [(t.mount_point, t.array) for t in targets] or [
            (call.members.mount_point(), call.plan.array)
        ]
    except Exception:  # the guard thaws within its bound anyway
        logger.exception("thaw after failure could not be sent")
        return " (thaw could not be sent; the freeze guard thaws within its bound)"
    hooked = [(m, a) for m, a in mounts if _runs_post_hook(call, a)]
    sent, unsent = _send_thaws(call, documents, settings, [x for x in mounts if x not in hooked])
    said = ""
    if hooked and sent:
        late, waited = _wait_for_thaws(sent, call.plan.instanceId)
        if late:
            said = (
                f" (the thaw of {', '.join(late)} had not ended after {waited} s "
                f"when the thaw that runs the post hook of {hooked[0][1]} was sent; the freeze "
                "guard thaws within its bound)"
            )
    unsent += _send_thaws(call, documents, settings, hooked)[1]
    if unsent:
        said += (
            f" (thaw of {', '.join(unsent)} could not be sent; the freeze guard thaws within "
            "its bound)"
        )
    return said


def _runs_post_hook(call: CommandCall, array: str) -> bool:
    own = hooks_of(call.plan, array)
    return bool(own and own.postSnapshot)


def _send_thaws(
    call: CommandCall,
    documents: Documents,
    settings: BackupSettings,
    mounts: list[tuple[str, str]],
) -> tuple[list[tuple[str, str]], list[str]]:
    """Send a thaw for each (mount point, array), in that order: (mount point, command id) of
    those sent, and the mount points whose thaw could not be sent."""
    sent: list[tuple[str, str]] = []
    unsent: list[str] = []
    for mount_point, array in mounts:
        try:
            own = hooks_of(call.plan, array)
            command = thaw_mount_point(call, documents, settings, mount_point, own)
            sent.append((mount_point, str(command.commandId)))
        except Exception:  # that mount point's guard thaws it within its bound anyway
            logger.exception("thaw after failure could not be sent", extra={"mount": mount_point})
            unsent.append(mount_point)
    return sent, unsent


def _wait_for_thaws(sent: list[tuple[str, str]], instance_id: str) -> tuple[list[str], int]:
    """Wait until every thaw in ``sent`` ended (any status but pending), for THAW_WAIT_SECONDS
    at most (elapsed); the mount points whose thaw had not ended by then, and the seconds it
    waited. Commands sent back to back run
    at once on the agent, up to its CommandWorkersLimit (5 by default: amazon-ssm-agent,
    agent/appconfig/constants.go DefaultCommandWorkersLimit), the rest queued; so a thaw sent
    after them may run before they end. GetCommandInvocation's Status stays Pending, InProgress
    or Delayed until the invocation ends (SSM API Reference, GetCommandInvocation)."""
    waiting = dict(sent)
    started = aws.monotonic()
    while True:
        for mount_point, command_id in list(waiting.items()):
            try:
                if commands.fetch(command_id, instance_id).status != "pending":
                    del waiting[mount_point]
            except Exception:  # asked again at the next look; the wait is bounded anyway
                logger.exception("a thaw after failure could not be looked at")
        # Bounded in elapsed time, the looks' own included (each is a call to SSM), not in
        # pauses: the function has its timeout to keep (60 s, lib/constructs/functions.ts).
        waited = aws.monotonic() - started
        if not waiting or waited + THAW_POLL_SECONDS > THAW_WAIT_SECONDS:
            return sorted(waiting), int(waited)
        aws.pause(THAW_POLL_SECONDS)


def _relabel_after_post_hook(state: BackupState) -> str:
    """The post hook failed after the set was taken: the application's hold through the snapshot
    instant is not confirmed (a held session that ended early fails its post hook), so the set
    keeps the label of what the filesystem got. Its snapshots are kept. With several arrays
    (takeWith), the set is that of the array whose thaw ran the hook. Returns the cause's end."""
    taken = state.snapshots
    assert taken is not None  # the caller looked
    set_id, ids, label, freeze = taken.setId, taken.ids, str(taken.consistency), state.freeze
    array = state.thaw.array if state.thaw is not None else None
    part = next((p for p in taken.together if p.array == array), None)
    if part is not None and array is not None:
        set_id, ids, label = part.setId, part.ids, str(part.consistency)
        freeze = freezes.command_of(state.freeze, array)
    if label == "application":
        said = freeze.result if freeze and isinstance(freeze.result, dict) else {}
        label = "fsfreeze" if said.get("frozen") is True else "crash"
        try:
            snapshots.relabel_set(ids, label)
        except Exception:
            logger.exception("the set's consistency label could not be lowered")
            return (
                f". Set {set_id} was taken before the post hook ran and is kept; its label "
                f"still says application but only {label} is certain: do not rely on it for "
                "more than that"
            )
    return (
        f". Set {set_id} was taken before the post hook ran and is kept, labelled {label} "
        "(the application's hold through the snapshot instant is not confirmed); check that "
        "the application is running normally again"
    )
