"""What ended restores left behind: their Fast Snapshot Restore, and their volumes.

A restore removes what it made on its own failure path, and a rule cleans up after one that was
stopped or timed out. Neither is certain: a rule's invocation is retried twice within about
three minutes, so volumes still creating or detaching then are never deleted; a run whose own
cleanup fails (FailedUnexplained) reaches no rule at all; and FSR costs by the hour while on.
The sweeper runs on a schedule and finds, by tags and by the FSR each run recorded as its own,
what belongs to restores that have ended, and removes it:

- FSR pairs a run claimed (lock.claim_fsr) whose run is no longer RUNNING are disabled, unless
  a running restore claims the same pair or EC2 shows it was enabled again since (another
  EnablingTime: someone else's); the claim is then dropped.
- Volumes tagged with a restore execution of this stack that FAILED, TIMED_OUT or was ABORTED
  are deleted when detached. An attached volume is never touched (the array may be mounted and
  in use), nor is a volume of a restore that SUCCEEDED (the restored array is the user's, even
  after they detach it), of one still RUNNING, of one Step Functions no longer knows, or of
  any other state machine.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from raidsnap import clients, fsr, lock, tags, volumes
from raidsnap.observability import logger

ENDED_BADLY = ("FAILED", "TIMED_OUT", "ABORTED")
LIVE_ATTACHMENT = ("attaching", "attached", "busy")


@dataclass
class Sweep:
    fsr_disabled: list[str] = field(default_factory=list)  # snapshot@zone
    claims_dropped: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    attached: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    @property
    def found(self) -> int:
        """What the sweep had to remove: each is something a run should have removed itself."""
        return len(self.fsr_disabled) + len(self.deleted)

    def as_dict(self) -> dict[str, Any]:
        return {
            "fsrDisabled": self.fsr_disabled,
            "claimsDropped": self.claims_dropped,
            "deletedVolumeIds": self.deleted,
            "attachedVolumeIds": self.attached,
            "pendingVolumeIds": self.pending,
            "unknownRunVolumeIds": self.unknown,
            "found": self.found,
        }


class _Statuses:
    """DescribeExecution once per execution per sweep."""

    def __init__(self) -> None:
        self._known: dict[str, str] = {}

    def __call__(self, execution_arn: str) -> str:
        if execution_arn not in self._known:
            self._known[execution_arn] = lock.status(execution_arn)
        return self._known[execution_arn]


def sweep(lock_table: str, restore_executions: str) -> Sweep:
    """``restore_executions``: the ARN prefix of this stack's restore executions."""
    result = Sweep()
    status = _Statuses()
    _sweep_fsr(lock_table, status, result)
    _sweep_volumes(restore_executions, status, result)
    if result.found or result.attached:
        logger.warning("the sweeper found what ended restores left", extra=result.as_dict())
    return result


def _same_time(recorded: str | None, seen: datetime | None) -> bool:
    if recorded is None or seen is None:
        return True  # the run's enable answer was lost: the claim is all there is to go by
    return datetime.fromisoformat(recorded) == seen


def _sweep_fsr(table: str, status: _Statuses, result: Sweep) -> None:
    claims = lock.fsr_claims(table)
    live = {p for c in claims if status(c.execution_arn) == "RUNNING" for p in c.pairs}
    for claim in claims:
        if status(claim.execution_arn) == "RUNNING":
            continue
        by_zone: dict[str, list[str]] = defaultdict(list)
        for pair in claim.pairs:
            if pair not in live:
                snapshot_id, _, zone = pair.partition("@")
                by_zone[zone].append(snapshot_id)
        for zone, snapshot_ids in sorted(by_zone.items()):
            seen = fsr.states(snapshot_ids, zone)
            off = sorted(
                sid
                for sid, pair in seen.items()
                if fsr.active(pair.state)
                and _same_time(claim.enabled_at.get(fsr.pair_key(sid, zone)), pair.enabling_time)
            )
            fsr.disable(off, zone)
            result.fsr_disabled += [fsr.pair_key(sid, zone) for sid in off]
        lock.drop_fsr_claim(table, claim.execution_arn)
        result.claims_dropped.append(claim.execution_arn)


def _sweep_volumes(prefix: str, status: _Statuses, result: Sweep) -> None:
    pages = (
        clients.ec2()
        .get_paginator("describe_volumes")
        .paginate(Filters=[{"Name": "tag-key", "Values": [tags.RESTORE_EXECUTION]}])
    )
    by_run: dict[str, list[volumes.VolumeView]] = defaultdict(list)
    for page in pages:
        for raw in page["Volumes"]:
            view = volumes.view(raw)
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
        for view in views:
            if view.state in ("deleting", "deleted"):
                continue
            attachment_states = {a[2] for a in view.attachments}
            if attachment_states & set(LIVE_ATTACHMENT):
                result.attached.append(view.volume_id)
            elif attachment_states or view.state == "creating":
                result.pending.append(view.volume_id)
            else:
                volumes.delete(view.volume_id)
                result.deleted.append(view.volume_id)
