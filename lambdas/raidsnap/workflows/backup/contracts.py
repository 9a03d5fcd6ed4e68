"""What each backup step reads and writes: the backup state machine's data, typed.

The state machine (statemachines/backup.asl.json) keeps one object, which Prepare's
ResultSelector makes in place of the input as sent: ``plan`` (Prepare), ``members``
(ResolveMembers; Prepare seeds it with the discovery it started), ``freeze`` and ``thaw`` (the
commands and their polls; Prepare seeds ``freeze`` as not started), ``snapshots``
(TakeSnapshotSet, then CheckSnapshots), ``retention`` (ApplyRetention, whose ``output`` is the
execution's output), ``keep`` (KeepFsr, then CheckKeptFsr: the array's fastRestore policy, whose
report the workflow adds to the output as ``fastRestore``), ``error`` (a Catch) and ``failure``
(ExplainFailure). Each Task's Parameters
name the keys it reads; each step gets them as one of the ``*Call`` models below. Results are
written with the fields that were set, so the JSON the Choice and Wait states read keeps the shape
it had.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from raidsnap.hooks import Hooks, SetConsistency
from raidsnap.models import Consistency, Contract, ExecutionRef, StepError
from raidsnap.set_locks import HeldSet, LockReport


class RunExecution(Contract):
    """The plan's execution: what names the set, the freeze and the hold on the array."""

    arn: str = ""
    startTime: str


class DiscoveryLook(Contract):
    """The discover document on the instance: skipped (and why), pending (its command and poll),
    or done (where the members came from)."""

    status: Literal["skipped", "pending", "done"]
    reason: str | None = None
    commandId: str | None = None
    waitSeconds: int | None = None
    budgetSeconds: int | None = None
    source: str | None = None
    note: str | None = None


class PrepareCall(Contract):
    """Prepare reads the execution input as sent (it validates it) and the execution."""

    input: JsonValue = None
    execution: ExecutionRef = Field(default_factory=ExecutionRef)


class PartPlan(Contract):
    """An array the run takes with the plan's own (the input's takeWith): its set, retention and
    configured hooks, and whether this run holds it against restores."""

    array: str
    setId: str
    retention: int
    hold: bool = False
    hooks: Hooks | None = None


class Plan(Contract):
    """Prepare's result: the validated request, the instance, the set's id, and whether this run
    holds the array against restores."""

    array: str
    consistency: Consistency
    # The run's application hooks (input or configuration), none when it has none.
    hooks: Hooks | None = None
    trigger: str
    retention: int
    execution: RunExecution
    setId: str
    instanceId: str
    availabilityZone: str
    discovery: DiscoveryLook
    agentTooOld: str | None = None
    hold: bool = False
    # What the run found about the array's instance (another instance carrying its tag).
    notes: list[str] = Field(default_factory=list)
    # Where the set is copied once taken (the ids of arrays.<name>.copies); unset: nowhere.
    copies: list[str] | None = None
    # True when the array has a fastRestore policy, or FSR its policy kept before it was
    # removed (the KeepFsr step turns that off); unset: the workflow skips KeepFsr.
    fastRestore: bool | None = None
    # The other arrays taken in the same CreateSnapshots call, by name.
    takeWith: list[PartPlan] = Field(default_factory=list)


class Member(Contract):
    index: int
    volumeId: str
    device: str | None = None


class Degraded(Contract):
    missingSlots: list[int] = Field(default_factory=list)
    withoutSlot: list[str] = Field(default_factory=list)


class Members(Contract):
    """ResolveMembers' result: the discovery as it stands, and once it is done the members, md's
    facts, the consistency the set can have, and what the run should tell about them."""

    discovery: DiscoveryLook
    members: list[Member] = Field(default_factory=list)
    md: dict[str, JsonValue] = Field(default_factory=dict)
    memberCount: int | None = None
    degraded: Degraded | None = None
    consistency: SetConsistency | None = None
    notes: list[str] = Field(default_factory=list)
    together: list[PartMembers] = Field(default_factory=list)
    # With takeWith: the arrays whose freeze document runs (to freeze, or to run the hooks),
    # in that order (the one with hooks first, then by name), thawed in reverse order.
    freezes: list[str] = Field(default_factory=list)

    def mount_point(self) -> str:
        return str(self.md.get("mountPoint") or "")


class PartMembers(Contract):
    """An array of takeWith as discovery (or its volume tags) found it."""

    array: str
    source: str | None = None
    members: list[Member] = Field(default_factory=list)
    md: dict[str, JsonValue] = Field(default_factory=dict)
    memberCount: int | None = None
    degraded: Degraded | None = None
    consistency: SetConsistency | None = None

    def mount_point(self) -> str:
        return str(self.md.get("mountPoint") or "")


class MembersCall(Contract):
    plan: Plan
    discovery: DiscoveryLook


class Command(Contract):
    """A freeze or thaw command as the workflow keeps it (aws.commands.record, then its polls);
    status "none" is Prepare's seed: no freeze was started."""

    status: Literal["none", "pending", "success", "failed"]
    commandId: str | None = None
    instanceId: str | None = None
    document: str | None = None
    waitSeconds: int | None = None
    budgetSeconds: int | None = None
    failOnError: bool | None = None
    requestedAt: str | None = None
    frozenUntil: str | None = None
    frozenAtMostUntil: str | None = None
    # A thaw that owes the run's post hook: it fails HookFailed unless it reports success.
    postOwed: bool | None = None
    stderrTail: str | None = None
    result: JsonValue = None
    # With takeWith (Members.freezes): the array this command is for, this run's
    # commands of the same kind before it (in order), and whether another array comes next.
    array: str | None = None
    earlier: list[Command] = Field(default_factory=list)
    more: bool | None = None


class CommandCall(Contract):
    """Freeze and Thaw read the plan (instance, set, execution) and the members (mount point);
    with several arrays to freeze, the freeze or thaw before this one."""

    plan: Plan
    members: Members
    freeze: Command | None = None
    thaw: Command | None = None


class Snapshots(Contract):
    """TakeSnapshotSet's result, then each CheckSnapshots': the set as taken and how its
    snapshots are going."""

    setId: str
    consistency: SetConsistency
    notes: list[str] = Field(default_factory=list)
    status: Literal["pending", "completed"]
    waitSeconds: int
    ids: list[str]
    polls: int = 0
    waitedSeconds: int = 0
    progress: int | None = None
    holdReleased: bool = False
    together: list[PartSnapshots] = Field(default_factory=list)


class PartSnapshots(Contract):
    """The set of an array of takeWith, taken in the plan's CreateSnapshots call."""

    array: str
    setId: str
    consistency: SetConsistency
    ids: list[str]
    notes: list[str] = Field(default_factory=list)


class SnapshotCall(Contract):
    plan: Plan
    members: Members
    freeze: Command


class CheckCall(Contract):
    plan: Plan
    snapshots: Snapshots


class AwaitCall(CheckCall):
    """AwaitSnapshots' invocation: the check, and the token its Task waits on."""

    taskToken: str


class NotDeleted(Contract):
    snapshotId: str
    code: str
    message: str


class RetentionReport(Contract):
    keep: int
    keptSets: list[str]
    deletedSets: list[str]
    deletedSnapshots: int
    notDeleted: list[NotDeleted]
    unrecordedSnapshots: list[str]
    unrecordedCount: int
    heldSets: list[HeldSet] = Field(default_factory=list)


class FastRestoreReport(Contract):
    """What the array's fastRestore policy did after the set was taken (the output's
    ``fastRestore``): kept (FSR is on the new set, off on the sets it replaced), skipped or
    failed (nothing enabled for the new set, the previous sets keep theirs; ``warning`` says
    why), superseded (a later backup's set was ready first), or removed (the policy is no
    longer configured: its FSR went off)."""

    status: str
    setId: str | None = None
    zones: list[str] = Field(default_factory=list)
    keptSets: list[str] = Field(default_factory=list)
    retiredSets: list[str] = Field(default_factory=list)
    warning: str | None = None
    notes: list[str] = Field(default_factory=list)


class CopyReport(Contract):
    """How the copy of the set to one destination went: its run there, copied or failed."""

    status: Literal["copying", "copied", "failed"]
    executionArn: str
    snapshotIds: list[str] = Field(default_factory=list)
    error: str | None = None
    cause: str | None = None


class CopyRound(Contract):
    """HandOverCopies' result, then each FollowCopies': the copy run of each destination (by its
    id), pending while one still runs, done once all ended."""

    status: Literal["pending", "done"]
    runs: dict[str, CopyReport] = Field(default_factory=dict)
    waitSeconds: int = 0
    waitedSeconds: int = 0
    report: dict[str, CopyReport] | None = None


class PartOutput(Contract):
    """An array of takeWith in the output: its set, as the array's own output names it."""

    array: str
    setId: str
    consistency: str
    snapshotIds: list[str]
    memberVolumeIds: list[str]
    retention: RetentionReport
    locks: LockReport | None = None


class BackupOutput(Contract):
    """The execution's output (DESIGN.md, backup): fields in the order the output has them."""

    array: str
    setId: str
    instanceId: str
    consistency: str
    snapshotIds: list[str]
    memberVolumeIds: list[str]
    discovery: str | None
    notes: list[str]
    retention: RetentionReport
    # What the array's lock policy did (none: no policy).
    locks: LockReport | None = None
    # Added by the workflow once the array's fastRestore policy ran (none: no policy).
    fastRestore: FastRestoreReport | None = None
    # Added by the workflow once the set's copies ended (none: the array is copied nowhere).
    copies: dict[str, CopyReport] | None = None
    # The sets of the input's takeWith arrays, taken in the same CreateSnapshots call.
    together: list[PartOutput] | None = None


class Retention(Contract):
    """ApplyRetention's result; the state machine's OutputPath makes ``output`` the run's."""

    output: BackupOutput


class RetentionCall(Contract):
    plan: Plan
    members: Members
    snapshots: Snapshots
    # The run's last thaw (with several arrays, the earlier ones in it): a failed one is said.
    thaw: Command | None = None


class KeptSnapshot(Contract):
    snapshotId: str
    sizeGib: int


class KeepFsr(Contract):
    """KeepFsr's result, then each CheckKeptFsr's: the policy's progress with the new set.
    ``status``: off (no policy, nothing to do), pending (waiting for the new set's FSR), or how
    it ended (the report's status). Time is counted in waited seconds."""

    status: Literal["off", "pending", "kept", "skipped", "failed", "superseded", "removed"]
    setId: str | None = None
    zones: list[str] = Field(default_factory=list)
    snapshots: list[KeptSnapshot] = Field(default_factory=list)
    # Pairs (snapshot@zone) this run found on before it claimed them: never disabled by it.
    before: list[str] = Field(default_factory=list)
    waitSeconds: int = 0
    waitedSeconds: int = 0
    limitSeconds: int = 0
    # pair -> [state, waited seconds when first seen in it]
    seen: dict[str, tuple[str, int]] = Field(default_factory=dict)
    reenabled: int = 0
    notes: list[str] = Field(default_factory=list)
    report: FastRestoreReport | None = None


class KeepFsrCall(Contract):
    """KeepFsr reads the plan, the snapshots (what they took) and the retention's output (the
    set and its snapshots); CheckKeptFsr also its own result so far."""

    plan: Plan
    snapshots: Snapshots
    retention: Retention
    keep: KeepFsr | None = None


class BackupState(Contract):
    """The whole run as ExplainFailure sees it: any step may have failed, so every key but the
    seeded ones may be missing (a failed Prepare's PrepareFailed gives the input, the execution
    and no freeze)."""

    execution: ExecutionRef = Field(default_factory=ExecutionRef)
    plan: Plan | None = None
    members: Members | None = None
    freeze: Command | None = None
    thaw: Command | None = None
    snapshots: Snapshots | None = None
    error: StepError | None = None


class FailureCall(Contract):
    state: BackupState


class Failure(Contract):
    """ExplainFailure's result: the Fail state's named error and cause."""

    error: str
    cause: str


class CopiesCall(Contract):
    """The copy step reads the plan (array, execution), the output (the set) and its own round."""

    plan: Plan
    retention: Retention
    copies: CopyRound | None = None
