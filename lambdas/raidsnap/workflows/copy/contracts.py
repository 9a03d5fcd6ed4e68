"""What the copy workflow reads and writes (statemachines/copy.asl.json), typed.

The copy workflow runs in the stack of the Region (and account) the copies go to. Its input is
the set as the source stack recorded it (raidsnap.copy_request.CopyInput); the state machine
keeps ``input`` and ``execution`` (the Start state), ``plan`` (Prepare), ``progress`` (each Copy
step), ``output`` (Finish), ``error`` (a Catch) and ``failure`` (Failed).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from raidsnap.models import Contract, ExecutionRef, StepError
from raidsnap.set_locks import HeldSet, LockReport


class CopyPrepareCall(Contract):
    input: JsonValue = None
    execution: ExecutionRef = Field(default_factory=ExecutionRef)


class PlannedMember(Contract):
    index: int
    sourceSnapshotId: str
    sizeGib: int = 0
    tags: dict[str, str] = Field(default_factory=dict)
    # The source snapshot's StartTime as EC2 gives it here (ISO 8601 UTC; "" when unknown).
    sourceStartTime: str = ""


class CopyPlan(Contract):
    """Prepare's result: the request as checked, this run, and the set's record here."""

    array: str
    setId: str
    region: str
    executionArn: str
    startTime: str
    sourceRegion: str
    sourceAccount: str
    members: list[PlannedMember]
    retention: int
    kmsKeyId: str | None = None
    # A copy of this set that is already complete here (an earlier run made it): nothing to do.
    alreadyCopied: bool = False


class CopyProgress(Contract):
    """Each Copy step's result: the copies started (slot -> snapshot), how far they are, and
    how long to wait before looking again."""

    status: Literal["pending", "completed"]
    copies: dict[str, str] = Field(default_factory=dict)
    progress: int = 0
    waitSeconds: int = 0
    waitedSeconds: int = 0
    # Members held back by the Region's limit of concurrent copies (none started for them yet).
    waiting: int = 0
    notes: list[str] = Field(default_factory=list)


class CopyCall(Contract):
    plan: CopyPlan
    progress: CopyProgress | None = None


class CopyRetention(Contract):
    keep: int
    keptSets: list[str]
    deletedSets: list[str]
    deletedSnapshots: int
    notDeleted: list[str] = Field(default_factory=list)
    # Sets retention would delete here, kept whole because a snapshot lock holds them.
    heldSets: list[HeldSet] = Field(default_factory=list)


class CopyOutput(Contract):
    """The execution's output."""

    array: str
    setId: str
    region: str
    source: dict[str, str]
    snapshotIds: list[str]
    retention: CopyRetention | None = None
    # What this stack's lock policy for the array did to the copied sets here.
    locks: LockReport | None = None
    notes: list[str] = Field(default_factory=list)


class CopyState(Contract):
    """The whole run as the failure path sees it."""

    execution: ExecutionRef = Field(default_factory=ExecutionRef)
    plan: CopyPlan | None = None
    progress: CopyProgress | None = None
    error: StepError | None = None


class CopyFailureCall(Contract):
    state: CopyState


class CopyFailure(Contract):
    error: str
    cause: str
    deletedSnapshotIds: list[str] = Field(default_factory=list)
