"""What the backup's functions read of the events rules bring them, and what they return to no
one but the log: EBS's createSnapshots event (the check function) and an ended run's cost."""

from __future__ import annotations

from pydantic import Field

from raidsnap.models import Contract


class EbsSnapshot(Contract):
    snapshot_id: str = ""  # the snapshot's ARN


class CompletionDetail(Contract):
    """What is read of EBS's createSnapshots event (Amazon EBS User Guide, "Amazon EventBridge
    events for Amazon EBS"): the call's result, its times, and its snapshots (all of them, or
    those in error when it failed)."""

    event: str = ""
    result: str = ""
    startTime: str | None = None
    endTime: str | None = None
    snapshots: list[EbsSnapshot] = Field(default_factory=list)


class SnapshotsCompletion(Contract):
    """ "EBS Multi-Volume Snapshots Completion Status", as the rule delivers it."""

    detail_type: str = Field(default="", alias="detail-type")
    detail: CompletionDetail = Field(default_factory=CompletionDetail)


class Answered(Contract):
    """What the check function did with a token (for the log: a callback Task's function result
    and an event target's are read by no one): the set, what EBS said, and how the Task was
    answered (completed, failed; None: not yet, or no one waits)."""

    setId: str | None = None
    result: str | None = None
    answered: str | None = None


class Priced(Contract):
    """An ended backup's cost as published (RunCostUsd) for its array."""

    priced: bool
    executionArn: str | None = None
    array: str | None = None
    status: str | None = None
    usd: str | None = None
    why: str | None = None
