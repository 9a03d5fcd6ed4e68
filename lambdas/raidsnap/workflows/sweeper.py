"""What ended restores left behind: their Fast Snapshot Restore, and their volumes.

A restore removes what it made on its own failure path, and a rule cleans up after one that was
stopped or timed out. Neither is certain: a rule's invocation is retried twice within about
three minutes, so volumes still creating or detaching then are never deleted; a run whose own
cleanup fails (FailedUnexplained) reaches no rule at all; and FSR costs by the hour while on.
The sweeper runs on a schedule and finds, by tags and by the FSR each run recorded as its own,
what belongs to restores that have ended, and removes it:

- FSR pairs a run claimed (lock.claim_fsr) whose run is no longer RUNNING are disabled, unless
  a running restore claims the same pair, an array's fastRestore policy keeps it
  (raidsnap.aws.kept_fsr), or EC2 shows it was enabled again since (another EnablingTime:
  someone else's); the claim is then dropped.
- The FSR a fastRestore policy kept for an array that no longer has one is disabled, and its
  claim dropped (the next backup would do the same, but an array may have no backups left).
- Volumes tagged with a restore execution of this stack that FAILED, TIMED_OUT or was ABORTED
  are deleted when detached, if that run never reached Assemble and recorded creating them
  (raidsnap.aws.created). Tags prove nothing (anyone allowed ec2:CreateTags can write them): a
  volume tagged with the run's execution and nonce that the run never recorded is reported as
  unknown and never deleted. An attached volume is never
  touched (the array may be mounted and in use), nor is a volume of a restore that SUCCEEDED
  (the restored array is the user's, even after they detach it), of one that reached Assemble
  (the assemble command may have built and mounted the array before the run failed: it is the
  user's, as the run's own failure path says), of one still RUNNING, of one Step Functions no
  longer knows, of any other state machine, or a volume a later replace restore kept as an old
  member (raidsnap:replaced-by).
- A run's record goes once the run has ended and nothing it names is left to remove: its
  volumes are gone (or are the user's: the run succeeded, reached Assemble, or a replace kept
  them), or the record is not of the run Step Functions knows by that ARN (which the sweeper
  never deletes by), so the table does not grow with every restore.
- One FSR pair or volume the sweeper cannot remove (a refusal from EC2, a snapshot that lost
  the tags its grant needs) is reported and skipped; it does not stop the rest of the sweep.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from botocore.exceptions import ClientError

from raidsnap import tags
from raidsnap.aws import (
    created,
    error_code,
    executions,
    fsr,
    kept_fsr,
    lock,
    run_secret,
    volumes,
)
from raidsnap.models import Contract
from raidsnap.observability import count, logger
from raidsnap.plan import fsr as plan_fsr
from raidsnap.plan.cleanup import disposition
from raidsnap.plan.volumes import VolumeView, run_nonce

# The restore state whose entry sends the assemble command: from there on the run's volumes may
# be the user's array (statemachines/restore.asl.json).
ASSEMBLE_STATE = "Assemble"

ENDED_BADLY = ("FAILED", "TIMED_OUT", "ABORTED")


class SweepReport(Contract):
    """What one sweep removed and what it left, as the sweep function answers and logs it."""

    fsrDisabled: list[str]
    claimsDropped: list[str]
    keptSetsDisabled: list[str]
    recordsDropped: list[str]
    deletedVolumeIds: list[str]
    attachedVolumeIds: list[str]
    pendingVolumeIds: list[str]
    unknownRunVolumeIds: list[str]
    usersVolumeIds: list[str]
    refused: list[str]
    found: int


@dataclass
class Sweep:
    fsr_disabled: list[str] = field(default_factory=list)  # snapshot@zone
    claims_dropped: list[str] = field(default_factory=list)
    # Sets whose FSR a fastRestore policy kept for an array that has none any more.
    kept_sets_disabled: list[str] = field(default_factory=list)
    records_dropped: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    attached: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    # Volumes of runs that reached Assemble, or old members a replace restore kept.
    users: list[str] = field(default_factory=list)
    # What EC2 refused to let the sweeper remove: "id: Code".
    refused: list[str] = field(default_factory=list)
    # Kept FSR a removed policy left on for now (a running restore holds its set).
    kept_notes: list[str] = field(default_factory=list)

    @property
    def found(self) -> int:
        """What the sweep had to remove: each is something a run should have removed itself."""
        return len(self.fsr_disabled) + len(self.deleted)

    def report(self) -> SweepReport:
        return SweepReport(
            fsrDisabled=self.fsr_disabled,
            claimsDropped=self.claims_dropped,
            keptSetsDisabled=self.kept_sets_disabled,
            recordsDropped=self.records_dropped,
            deletedVolumeIds=self.deleted,
            attachedVolumeIds=self.attached,
            pendingVolumeIds=self.pending,
            unknownRunVolumeIds=self.unknown,
            usersVolumeIds=self.users,
            refused=self.refused,
            found=self.found,
        )


class _Statuses:
    """DescribeExecution once per execution per sweep: its status, and its start (which, with
    the ARN, names the run: execution names are reused after 90 days)."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[str, datetime | None]] = {}
        self._secret: bytes | None = None

    def _look(self, execution_arn: str) -> tuple[str, datetime | None]:
        if execution_arn not in self._known:
            self._known[execution_arn] = lock.describe(execution_arn)
        return self._known[execution_arn]

    def __call__(self, execution_arn: str) -> str:
        return self._look(execution_arn)[0]

    def nonce(self, execution_arn: str) -> str | None:
        """The raidsnap:restore-run of the run Step Functions knows by this ARN."""
        started = self._look(execution_arn)[1]
        if started is None:
            return None
        if self._secret is None:
            self._secret = run_secret.secret()
        return run_nonce(execution_arn, started, self._secret)


def sweep(
    lock_table: str, restore_executions: str, kept_arrays: frozenset[str] | None = None
) -> Sweep:
    """``restore_executions``: the ARN prefix of this stack's restore executions;
    ``kept_arrays``: the arrays with a fastRestore policy (None: unknown, leave every claim)."""
    result = Sweep()
    status = _Statuses()
    _sweep_fsr(lock_table, status, result)
    if kept_arrays is not None:
        # A lock whose holder has ended holds nothing (its lease may run for days yet); a
        # holder that is not one of this stack's restores is not the sweeper's to judge.
        def alive(arn: str) -> bool:
            return not arn.startswith(restore_executions) or status(arn) == "RUNNING"

        _sweep_kept(lock_table, kept_arrays, alive, result)
    records = {(r.execution_arn, r.run): r.volume_ids for r in created.records(lock_table)}
    _sweep_volumes(restore_executions, status, records, result)
    _drop_records(lock_table, status, records, result)
    if result.found or result.attached:
        logger.warning("the sweeper found what ended restores left", extra=result.report().dump())
    # One number the alarm watches (anything found means a run did not clean up after itself),
    # and what it was made of.
    count("LeftoversFound", result.found)
    count("LeftoverFsrDisabled", len(result.fsr_disabled))
    count("LeftoverVolumesDeleted", len(result.deleted))
    count("LeftoverVolumesAttached", len(result.attached))
    return result


def _same_time(recorded: str | None, seen: datetime | None) -> bool:
    if recorded is None or seen is None:
        return True  # the run's enable answer was lost: the claim is all there is to go by
    return datetime.fromisoformat(recorded) == seen


def _sweep_fsr(table: str, status: _Statuses, result: Sweep) -> None:
    claims = lock.fsr_claims(table)
    live = {p for c in claims if status(c.execution_arn) == "RUNNING" for p in c.pairs}
    live |= {p for k in kept_fsr.claims(table) for p in k.pairs}
    for claim in claims:
        if status(claim.execution_arn) == "RUNNING":
            continue
        ended = plan_fsr.by_zone(p for p in claim.pairs if p not in live)
        for zone, snapshot_ids in sorted(ended.items()):
            seen = fsr.states(snapshot_ids, zone)
            off = sorted(
                sid
                for sid, pair in seen.items()
                if plan_fsr.active(pair.state)
                and _same_time(
                    claim.enabled_at.get(plan_fsr.pair_key(sid, zone)), pair.enabling_time
                )
            )
            for sid in off:
                try:
                    fsr.disable([sid], zone)
                except ClientError as err:
                    result.refused.append(f"{plan_fsr.pair_key(sid, zone)}: {error_code(err)}")
                    continue
                result.fsr_disabled.append(plan_fsr.pair_key(sid, zone))
        lock.drop_fsr_claim(table, claim.execution_arn)
        result.claims_dropped.append(claim.execution_arn)


def _sweep_kept(
    table: str, kept_arrays: frozenset[str], alive: Callable[[str], bool], result: Sweep
) -> None:
    for claim in kept_fsr.claims(table):
        if claim.array in kept_arrays:
            continue
        try:
            off, notes = kept_fsr.turn_off(table, claim.array, claim.sets, alive)
        except ClientError as err:
            result.refused.append(f"{kept_fsr.KEY_PREFIX}{claim.array}: {error_code(err)}")
            continue
        result.kept_sets_disabled += off
        result.kept_notes += notes
        if off or notes:
            logger.warning(
                "the fastRestore policy of an array is gone: its FSR was disabled",
                extra={"array": claim.array, "sets": off, "notes": notes},
            )


def _sweep_volumes(
    prefix: str, status: _Statuses, records: dict[tuple[str, str], frozenset[str]], result: Sweep
) -> None:
    by_run: dict[str, list[VolumeView]] = defaultdict(list)
    for view in volumes.tagged_with(tags.RESTORE_EXECUTION):
        by_run[view.tags.get(tags.RESTORE_EXECUTION, "")].append(view)
    for arn, views in sorted(by_run.items()):
        if not arn.startswith(prefix):
            continue  # not a restore of this stack: not ours
        state = status(arn)
        if state == "GONE":
            result.unknown += [v.volume_id for v in views]
            continue
        if state not in ENDED_BADLY:
            continue
        assembled = reached_assemble(arn)
        run = status.nonce(arn)
        mine = records.get((arn, run or ""), frozenset())
        for view in views:
            found = disposition(view)
            if found == "gone":
                continue
            if run is None or view.tags.get(tags.RESTORE_RUN) != run or view.volume_id not in mine:
                # An earlier run of the same name (names are reused after 90 days), or a volume
                # the run never recorded creating (whatever its tags say): not the ended run's.
                result.unknown.append(view.volume_id)
                continue
            if assembled or tags.REPLACED_BY in view.tags:
                result.users.append(view.volume_id)
                continue
            if found == "attached":
                result.attached.append(view.volume_id)
            elif found in ("detaching", "creating"):
                result.pending.append(view.volume_id)
            else:
                try:
                    volumes.delete(view.volume_id)
                except ClientError as err:
                    result.refused.append(f"{view.volume_id}: {error_code(err)}")
                    continue
                result.deleted.append(view.volume_id)


def _drop_records(
    table: str, status: _Statuses, records: dict[tuple[str, str], frozenset[str]], result: Sweep
) -> None:
    """Drop the record of each run that has ended with nothing left to remove."""
    for (arn, run), ids in sorted(records.items()):
        state = status(arn)
        if state not in (*ENDED_BADLY, "SUCCEEDED", "GONE"):
            continue  # running, or waiting for a redrive: its record is still in use
        if state in ENDED_BADLY and run == status.nonce(arn) and not reached_assemble(arn):
            views = volumes.describe(ids)
            left = [
                v
                for v in views.values()
                if disposition(v) != "gone" and tags.REPLACED_BY not in v.tags
            ]
            if left:
                continue  # still to remove once detached
        created.drop(table, arn, run)
        result.records_dropped.append(f"{arn}#{run}")


def reached_assemble(execution_arn: str) -> bool:
    """Whether the run entered its Assemble state."""
    return executions.entered(execution_arn, ASSEMBLE_STATE)
