"""What each drill step reads and writes: the drill state machine's data, typed.

The state machine (statemachines/drill.asl.json) keeps one object: ``input`` and ``execution``
(from its Start state), ``plan`` (Prepare), ``restore`` (the nested restore execution, as its
ResultSelector keeps it), ``discover``, ``verification``, ``release``, ``teardown``, and the
errors its Catches write (``error``; ``teardownError`` for a teardown step that failed). Start
declares ``restore`` and ``teardown`` as empty objects: the teardown steps run whatever step
failed, and name those keys in their Parameters. Each Task names the keys it reads and writes
its result to its own key; results are written with the fields that were set, so the JSON the
Choice states, the nested restore and the operators read stays exactly as it was.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue, TypeAdapter

from raidsnap.models import Contract, ExecutionRef, StepError


class RestoreRequest(Contract):
    """The nested restore's execution input (DESIGN.md, restore input): attach mode, read-only,
    at the drill's md device and mount point."""

    array: str
    setId: str
    targetInstanceId: str
    mode: Literal["attach"] = "attach"
    readOnly: bool = True
    mountPoint: str
    mdDevice: str
    initialization: str
    # The copy's own md UUID, chosen by the drill so that its teardown can name it to release
    # even when the restore never reached its end.
    newMdUuid: str | None = None


class PlanExecution(Contract):
    id: str
    startTime: str | None = None


class Plan(Contract):
    """Prepare's result: the validated request and the nested restore's name, ARN and input."""

    array: str
    setId: str
    targetInstanceId: str
    mountPoint: str
    mdDevice: str
    trigger: str
    execution: PlanExecution
    restoreName: str
    restoreExecutionArn: str
    restoreInput: RestoreRequest


class PrepareCall(Contract):
    """What Prepare reads: the execution input as sent (validated here), and the execution."""

    input: JsonValue = None
    execution: ExecutionRef = Field(default_factory=ExecutionRef)


class RestoreOutput(Contract):
    """The parts of the restore execution's output (DESIGN.md, restore output;
    workflows/restore/finish.py) a drill reads."""

    array: str | None = None
    setId: str | None = None
    volumeIds: list[str] = Field(default_factory=list)
    mdDevice: str | None = None
    mountPoint: str | None = None
    mdUuid: str | None = None
    # The copy's own md UUID (every restored array gets one).
    newMdUuid: str | None = None
    targetInstanceId: str | None = None
    # What the restore cost, with its usage (raidsnap.aws.costs), which the drill's adds to.
    cost: dict[str, JsonValue] | None = None


class RestoreGiven(Contract):
    """The input the nested restore ran with, as Step Functions reports it."""

    # As given: only JSON true asked for a read-only mount.
    readOnly: JsonValue = None


class RestoreRun(Contract):
    """The Restore Task's result (its ResultSelector); empty until that Task succeeded."""

    executionArn: str | None = None
    input: RestoreGiven | None = None
    output: RestoreOutput | None = None


# ---------------------------------------------------------------------- commands


class Member(Contract):
    # null for a device that holds no working slot (a spare, a faulty or rebuilding one).
    slot: int | None = None
    volumeId: str | None = None


class Filesystem(Contract):
    type: str | None = None


class DiscoveredArray(Contract):
    """One array of the discover document's last JSON line (the shape its script prints)."""

    device: str | None = None
    uuid: str | None = None
    members: list[Member] | None = None
    filesystem: Filesystem | None = None
    mountPoint: str | None = None


class Discovered(Contract):
    arrays: list[DiscoveredArray] | None = None


class Command(Contract):
    """A command the drill sent (aws/commands.record), as the poll step keeps it."""

    commandId: str
    instanceId: str
    document: str
    status: Literal["pending", "success", "failed"]
    waitSeconds: int
    budgetSeconds: int
    failOnError: bool
    result: Discovered | None = None
    stderrTail: str | None = None


class Skipped(Contract):
    """Release's result when no volume of the drill's restore is attached to the drill instance."""

    status: Literal["skipped"] = "skipped"
    reason: str


class Verification(Contract):
    """Verify's result, and the ``verification`` of the drill's output."""

    setId: str
    mdUuid: str
    filesystem: str | None
    members: int
    readOnly: bool
    # What the drill found that would make a real recovery of the array fail.
    warnings: list[str] = Field(default_factory=list)


class Teardown(Contract):
    """RemoveVolumes' result, carried from one pass to the next: the restore's run nonce
    ("" when it never started), the passes made, the detach requests per volume, what was
    deleted and what is still on its way."""

    run: str | None = None
    looks: int = 0
    detachAsks: dict[str, int] = Field(default_factory=dict)
    deleted: list[str] = Field(default_factory=list)
    left: list[str] = Field(default_factory=list)
    status: Literal["pending", "done"] | None = None
    waitSeconds: int | None = None


class DiscoverCall(Contract):
    step: Literal["discover"]
    plan: Plan


class CheckCall(Contract):
    step: Literal["check"]
    plan: Plan
    restore: RestoreRun
    discover: Command


class ReleaseCall(Contract):
    step: Literal["release"]
    plan: Plan
    restore: RestoreRun


class RemoveCall(Contract):
    step: Literal["volumes"]
    plan: Plan
    restore: RestoreRun
    teardown: Teardown


VerifyCall = Annotated[DiscoverCall | CheckCall, Field(discriminator="step")]
TeardownCall = Annotated[ReleaseCall | RemoveCall, Field(discriminator="step")]
VERIFY_CALL: TypeAdapter[DiscoverCall | CheckCall] = TypeAdapter(VerifyCall)
TEARDOWN_CALL: TypeAdapter[ReleaseCall | RemoveCall] = TypeAdapter(TeardownCall)


# ---------------------------------------------------------------------- report


class DrillRun(Contract):
    """The run's object as the Report step receives it: every key the run wrote, since the
    report must tell what happened whichever step failed (and Prepare's may not exist)."""

    input: JsonValue = None
    execution: ExecutionRef = Field(default_factory=ExecutionRef)
    plan: Plan | None = None
    restore: RestoreRun = Field(default_factory=RestoreRun)
    verification: Verification | None = None
    teardown: Teardown = Field(default_factory=Teardown)
    error: StepError | None = None
    # What a teardown step's Catch wrote: Release's failure is tolerated (RemoveVolumes then
    # forces the detach); RemoveVolumes' failure leaves volumes behind.
    teardownError: StepError | None = None


class ReportCall(Contract):
    state: DrillRun


class DrillOutput(Contract):
    """The drill execution's output (the Passed state's OutputPath)."""

    array: str
    setId: str | None
    targetInstanceId: JsonValue
    restoreExecutionArn: str | None
    verification: Verification | None
    deletedVolumeIds: list[str]
    message: str
    # What the drill cost: its own run, its restore's, and the volumes while they lived.
    cost: dict[str, JsonValue] | None = None


class DrillReport(Contract):
    """Report's result: passed (with the output), or the Fail state's error and cause."""

    passed: bool
    array: str
    message: str
    output: DrillOutput | None = None
    error: str | None = None
    cause: str | None = None
