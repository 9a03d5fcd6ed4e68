"""After a backup run that ended otherwise than in success while it followed its copies.

A run stopped or timed out never reaches its Catch, and a run that fails on its way (a look at
a copy run there refused past its retries, a function's error) goes to ExplainFailure, which
knows nothing of copies: neither reaches the FollowCopies look that takes back the share with
a backup account, so the share would stay open for good ("Share an Amazon EBS snapshot":
shared until the permission is removed), and the set's record would say "copying" until
COPY_FOLLOWED_FOR. A rule on the run's end (FAILED, ABORTED, TIMED_OUT: Step Functions sends
every execution status change to EventBridge, "Step Functions execution status change" events,
detail.status) brings it here: every copy still recorded as copying is recorded as failed
(BackupEnded; its copy run there may still complete, and is that stack's to keep or delete),
and the set is shared with no backup account any more. A copy there still under way may then
fail for want of the share; that run deletes what it made."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pydantic import Field

from raidsnap import copy_places, tags
from raidsnap.aws import handover, manifests, snapshot_sets
from raidsnap.execution_events import StatusChange
from raidsnap.models import Contract
from raidsnap.observability import for_array, logger

# Every end but success (a run that succeeded followed each copy to its end and took the share
# back; one that failed after doing so finds nothing left to do here).
ENDED_UNFOLLOWED = ("FAILED", "ABORTED", "TIMED_OUT")


class CopiesAbandoned(Contract):
    """What was done after the run ended: the copies no longer followed, the accounts the set
    is shared with no more."""

    setId: str = ""
    unfollowed: list[str] = Field(default_factory=list)
    unshared: list[str] = Field(default_factory=list)


def _account(execution_arn: str) -> str:
    parts = execution_arn.split(":")
    return parts[4] if len(parts) > 4 else ""


def _array_and_set(arn: str, raw_input: str | None) -> tuple[str, str]:
    try:
        value = json.loads(raw_input or "{}")
    except json.JSONDecodeError:
        value = {}
    array = value.get("array") if isinstance(value, dict) else None
    # The run's snapshots carry its execution (raidsnap:backup-execution) and the set's id.
    found = snapshot_sets.tagged_with_backup(arn)
    set_ids = {t["Value"] for s in found for t in s.get("Tags", []) if t["Key"] == tags.SET_ID}
    return (array if isinstance(array, str) else ""), (set_ids.pop() if len(set_ids) == 1 else "")


def after_run_ended(event: StatusChange) -> CopiesAbandoned:
    detail = event.detail
    arn = detail.executionArn if detail else None
    if detail is None or arn is None or detail.status not in ENDED_UNFOLLOWED:
        return CopiesAbandoned()
    array, set_id = _array_and_set(arn, detail.input)
    s = snapshot_sets.get_set(array, set_id) if array and set_id else None
    if s is None or s.manifest is None or s.manifest.execution_arn != arn:
        return CopiesAbandoned()
    for_array(array)
    here = _account(arn)
    places = {d.id: d for d in copy_places.copies_by_array().get(array, [])}
    unfollowed: list[str] = []
    unshared: list[str] = []
    ended = datetime.now(UTC).isoformat()
    for key, copy in s.manifest.copies.items():
        d = places.get(key)
        if d is not None and d.account != here and d.account not in unshared:
            handover.share((x.snapshot_id for x in s.members), d.account, add=False)
            unshared.append(d.account)
        if copy.get("status") == "copying":
            record = {"status": "failed", "execution": copy.get("execution", ""), "ended": ended}
            manifests.record_copy(array, set_id, key, record | {"error": "BackupEnded"})
            unfollowed.append(key)
    done = CopiesAbandoned(setId=set_id, unfollowed=unfollowed, unshared=unshared)
    logger.info("copies no longer followed", extra=done.dump())
    return done
