"""What each restore step reads and writes: the restore state machine's data, typed.

The state machine (statemachines/restore.asl.json) keeps one object: ``input`` and
``execution`` (the Start state), then one key per step's result: ``plan`` (Prepare), ``fsr``
(EnableFsr, CheckFsr, or SkipFsr's ``skipped``), ``volumes`` (CreateVolumes, CheckVolumes),
``release``, ``old`` (replace mode), ``attach``, ``assemble``, ``prewarm``, ``finish``; a
Catch adds ``error``, ``prewarmError`` or ``finishError``, and the failure path ``cleanup``.
Each step is sent the keys it reads (Parameters) and its result goes to its own key; no step
rewrites another's. Where several steps add to one thing (the output's notes, how the volumes
are initialized), each keeps its part in its own result and Finish puts them together.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, JsonValue, model_validator

from raidsnap.models import Contract, ExecutionRef, Poll, RestoreMode, StepError


class Member(Contract):
    """One member's volume as Prepare planned it (raidsnap.plan.volumes.member_specs)."""

    index: int
    snapshotId: str
    volumeType: str
    iops: int | None = None
    throughput: int | None = None
    sizeGib: int
    tags: dict[str, str] = Field(default_factory=dict)


class Initialization(Contract):
    """How the run was asked to initialize the volumes (the input, else the configuration), and
    how Prepare decided to (raidsnap.workflows.restore.initialization): per member, with the
    model's estimate for an auto choice."""

    requested: str
    # fsr, rate, prewarm or none for every member, or mixed (``members`` says which).
    used: str
    rate: int | None = None
    allowOptimizing: bool = False
    fsrTimeoutSeconds: int
    # Per member, in member order; empty in a plan made before members could differ: ``used``.
    members: list[str] = Field(default_factory=list)
    # Whether any member is to be created from an FSR-enabled snapshot (the state machine's
    # ChooseInitialization reads it, so it is always written).
    withFsr: bool
    # The model's prediction for the chosen way, seconds from the run's start.
    mountedSeconds: int | None = None
    fullPerformanceSeconds: int | None = None
    # The target's EBS bandwidth (MiB/s, baseline and maximum), when EC2 described its type: what
    # the prewarm's predicted end is told with (raidsnap.plan.restore_time.read_seconds).
    ebsBaselineMibs: float | None = None
    ebsMaximumMibs: float | None = None

    def member(self, index: int) -> str:
        return self.members[index] if self.members else self.used

    @model_validator(mode="before")
    @classmethod
    def _with_fsr_of_an_older_plan(cls, data: Any) -> Any:
        """A plan written before withFsr existed (a run in flight during an upgrade) had FSR
        exactly when it was its initialization."""
        if isinstance(data, dict) and "withFsr" not in data:
            return {**data, "withFsr": data.get("used") == "fsr"}
        return data


class Plan(Contract):
    """Prepare's result: the run's set, target, array and volumes, all checked."""

    array: str
    setId: str
    executionArn: str
    run: str
    setTakenAt: str
    targetInstanceId: str
    availabilityZone: str
    tagTarget: bool
    mode: RestoreMode
    mdDevice: str
    # The set's md UUID: what the restored volumes carry until assembled.
    mdUuid: str
    # The identity the restored array gets (assemble's NewMdUuid, mdadm --update=uuid), chosen
    # here so that a retried assemble finds the array already under it. Empty in a plan made
    # before restored arrays got their own: the document then generates one.
    newMdUuid: str = ""
    # The md UUID of the array on the target now (replace mode): what release must find there
    # and what its old members carry. Empty: the set's (an array never restored).
    liveMdUuid: str = ""
    mountPoint: str
    # The array's own mount point (a replace onto the one its set recorded): the documents may
    # then mount at a system directory itself (/srv, /home), never in a system tree.
    ownMountPoint: bool = False
    readOnly: bool
    initialization: Initialization
    members: list[Member]
    sourceVolumeIds: list[str]
    notes: list[str] = Field(default_factory=list)

    @property
    def releaseMdUuid(self) -> str:
        """The md UUID of the array a replace releases (and its old members carry)."""
        return self.liveMdUuid or self.mdUuid

    @property
    def restoredMdUuids(self) -> set[str]:
        """Every md UUID an array of this run's volumes can carry: the set's, until assembled,
        and the new one."""
        return {u for u in (self.mdUuid, self.newMdUuid) if u}


class Fsr(Contract):
    """EnableFsr's and CheckFsr's result (SkipFsr writes ``skipped``): where FSR for the set
    stands, which pairs this run enabled (``ours``) and which were on before it (``before``)."""

    status: Literal["skipped", "pending", "ready", "fallback"]
    ours: list[str] = Field(default_factory=list)
    before: list[str] = Field(default_factory=list)
    waitedSeconds: int = 0
    waitSeconds: int | None = None
    # Per snapshot: the state it was first seen in, and the waited seconds when it was.
    seen: dict[str, tuple[str, int]] = Field(default_factory=dict)
    states: dict[str, str] | None = None
    disabled: bool = False
    notes: list[str] = Field(default_factory=list)

    def used(self, planned: str) -> str:
        """The initialization a member planned for ``planned`` goes on with: prewarm once FSR
        fell back."""
        return "prewarm" if self.status == "fallback" and planned == "fsr" else planned


class Volumes(Contract):
    """CreateVolumes' and CheckVolumes' result: the new volumes in member order."""

    status: Literal["creating", "available"]
    ids: list[str]
    # The initialization the volumes get: the plan's, or prewarm when FSR fell back.
    initialization: str
    waitSeconds: int
    budgetSeconds: int
    fastRestored: list[bool] | None = None
    # After FSR: the volumes created without a volume creation credit, read on the instance.
    prewarmVolumeIds: list[str] | None = None
    # How each member is initialized, in member order (fsr, rate, prewarm or none).
    members: list[str] | None = None
    fsrDisabled: bool | None = None
    notes: list[str] = Field(default_factory=list)

    @property
    def poll(self) -> Poll:
        return Poll(self.waitSeconds, self.budgetSeconds)


class CommandRun(Contract):
    """A release, assemble or prewarm document on the target, as CommandPoll follows it
    (raidsnap.aws.commands.record and poll)."""

    commandId: str
    instanceId: str
    document: str
    status: Literal["pending", "success", "failed"]
    waitSeconds: int
    budgetSeconds: int
    failOnError: bool = True
    # A prewarm: how long it is predicted to read, and how long the run has waited for it (the
    # looks follow the prediction: raidsnap.models.wait_toward_end).
    predictedSeconds: int | None = None
    waitedSeconds: int | None = None
    result: dict[str, JsonValue] | None = None
    stderrTail: str | None = None


class Released(Contract):
    """One member the release document reports (its last JSON line's ``members``)."""

    volumeId: JsonValue = None
    device: JsonValue = None


class OldMembers(Contract):
    """DetachOldMembers' result (replace mode): the old members, tagged, then detached."""

    status: Literal["detaching", "detached"]
    volumeIds: list[str]
    waitSeconds: int
    budgetSeconds: int
    notes: list[str] = Field(default_factory=list)
    # Each old member's device name on the instance before it was detached (EC2's, e.g.
    # /dev/sdf): what an operator gives attach-volume to put it back.
    devices: dict[str, str] = Field(default_factory=dict)


class Attach(Contract):
    """AttachVolumes' result: the target tagged (if it had to be), then each new volume's
    device in member order, until all are attached."""

    status: Literal["attaching", "attached"]
    targetTagged: bool | None = None
    devices: list[str] | None = None
    waitSeconds: int
    budgetSeconds: int


class FsrCall(Contract):
    plan: Plan
    fsr: Fsr | None = None


class CreateCall(Contract):
    plan: Plan
    fsr: Fsr


class CheckCall(Contract):
    plan: Plan
    fsr: Fsr
    volumes: Volumes


class CommandCall(Contract):
    step: Literal["release", "assemble", "prewarm"]
    plan: Plan
    volumes: Volumes | None = None


class DetachCall(Contract):
    plan: Plan
    volumes: Volumes
    release: CommandRun
    old: OldMembers | None = None


class AttachCall(Contract):
    plan: Plan
    volumes: Volumes
    attach: Attach | None = None


class Confirm(Contract):
    """The failure path asking the target whether anything uses this run's attached volumes."""

    status: Literal["pending", "free", "kept"]
    phase: Literal["discover", "release"] | None = None
    queue: list[str] | None = None
    # The md UUID of each queued device, as discover reported it: release checks it.
    queueUuids: dict[str, str] | None = None
    commandId: str | None = None
    budgetSeconds: int | None = None
    reason: str | None = None


class PutBack(Contract):
    """The failure path of a replace putting the released array back in service: the old
    members this run detached attached again where they were (``attach``), then the assemble
    document on them under their own md UUID, where the array was mounted (``assemble``);
    ``failed``: it could not, and ``reason`` says why."""

    status: Literal["pending", "done", "failed"]
    phase: Literal["attach", "assemble"] = "assemble"
    volumeIds: list[str] = Field(default_factory=list)
    # Old members no longer attached to the target (the replace detached them).
    detached: list[str] = Field(default_factory=list)
    # Those of them this put-back attached again.
    reattached: list[str] = Field(default_factory=list)
    commandId: str | None = None
    budgetSeconds: int | None = None
    reason: str | None = None


class Cleanup(Contract):
    """The failure step's result, one look further each call; the Fail state reads
    ``error`` and ``cause``."""

    error: str
    cause: str
    looks: int = 0
    status: Literal["pending", "done"] | None = None
    waitSeconds: int | None = None
    fsrDisabled: list[str] | None = None
    fsrDone: bool | None = None
    confirm: Confirm | None = None
    detachAsks: dict[str, int] | None = None
    deleted: list[str] | None = None
    kept: list[str] | None = None
    # Volumes tagged as this run's that it never recorded creating: left alone, reported.
    unknown: list[str] | None = None
    # Replace mode: the release document's answer as the failure path learned it (from the
    # run's state, or by asking SSM when the step that would have read it failed); {} when the
    # run sent none.
    release: dict[str, JsonValue] | None = None
    putBack: PutBack | None = None


class RestoreState(Contract):
    """The run's whole object: what Finish and the failure path read (either may find any
    step's key missing, having come from wherever the run got to)."""

    execution: ExecutionRef = Field(default_factory=ExecutionRef)
    plan: Plan | None = None
    fsr: Fsr | None = None
    volumes: Volumes | None = None
    release: CommandRun | None = None
    old: OldMembers | None = None
    attach: Attach | None = None
    assemble: CommandRun | None = None
    prewarm: CommandRun | None = None
    prewarmError: StepError | None = None
    error: StepError | None = None
    cleanup: Cleanup | None = None


class StateCall(Contract):
    state: RestoreState


class PrepareCall(Contract):
    """What Prepare reads: the execution input as it was sent (checked by Prepare itself, so
    that a bad input fails with InvalidInput naming its field), and the execution."""

    input: JsonValue = None
    execution: ExecutionRef = Field(default_factory=ExecutionRef)


class Output(Contract):
    """The restore execution's output (DESIGN.md), in the order it has always had."""

    array: str
    setId: str
    setTakenAt: str | None
    volumeIds: list[str]
    devices: list[str]
    mdDevice: str
    mountPoint: str
    # The set's md UUID, and the restored array's own (what mdadm.conf, fstab and the volumes'
    # raidsnap:md-uuid tag name; the next backup records it).
    mdUuid: str
    newMdUuid: str
    targetInstanceId: str
    availabilityZone: str
    mode: str
    initialization: str
    requestedInitialization: str
    fastRestored: list[bool]
    memberInitialization: list[str]
    replacedVolumeIds: list[str]
    prewarm: dict[str, JsonValue] | None
    warnings: list[str]
    notes: list[str]
    # What the run cost at list prices, as its last step read it (raidsnap.aws.costs).
    cost: dict[str, JsonValue] | None = None


class Finished(Contract):
    output: Output
