"""Execution inputs, validated before anything in EC2 is touched."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal, TypeVar, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)
from pydantic_core import PydanticCustomError

from raidsnap.errors import InvalidInputError
from raidsnap.hooks import HooksChoice


class Contract(BaseModel):
    """A step's input or result as the state machine holds it (workflows/*/contracts.py).

    A step reads only what it needs of the run's object; the state machine adds keys (the
    Catch's error, the final report) that no step has to know."""

    model_config = ConfigDict(extra="ignore")

    def dump(self) -> dict[str, Any]:
        """The JSON the state machine stores: only the fields this result set."""
        return self.model_dump(exclude_unset=True, mode="json")


class StepError(Contract):
    """What a Catch writes beside the state (ResultPath): Step Functions' error name and cause."""

    Error: str = "States.Runtime"
    Cause: str = ""


class ExecutionRef(Contract):
    """The context object's execution as a Start state copies it ($$.Execution)."""

    id: str = ""
    name: str = ""
    startTime: str | None = None


@dataclass(frozen=True)
class Poll:
    """How a loop of the workflow waits: the seconds until its next look (the Wait state reads
    waitSeconds) and what is left of its budget. Both count the time the workflow has waited,
    never the wall clock, so a retried or redriven step does not shorten them."""

    wait_seconds: int
    budget_seconds: int

    @classmethod
    def of(cls, state: Mapping[str, Any]) -> Poll:
        return cls(int(state["waitSeconds"]), int(state["budgetSeconds"]))

    def waited(self) -> Poll:
        """After one wait: the budget is that much smaller."""
        return replace(self, budget_seconds=self.budget_seconds - self.wait_seconds)

    @property
    def spent(self) -> bool:
        return self.budget_seconds <= 0

    def as_dict(self) -> dict[str, int]:
        return {"waitSeconds": self.wait_seconds, "budgetSeconds": self.budget_seconds}


# How a loop follows something predicted to end at a known time (a prewarm): looks at most
# FOLLOW_LONGEST_SECONDS apart before the predicted end, every FOLLOW_SHORT_SECONDS right after.
# Each look is three state transitions (Wait, Task, Choice), which Standard workflows bill, and
# about ten history events, of the 25,000 an execution may have ("Maximum execution history
# size", Step Functions service quotas, docs.aws.amazon.com/step-functions/latest/dg/
# service-quotas.html): a 48-hour prewarm must not look every 15 s (11,520 looks).
FOLLOW_SHORT_SECONDS = 15
FOLLOW_LONGEST_SECONDS = 300


def wait_toward_end(predicted_seconds: int, waited_seconds: int) -> int:
    """The wait before the next look at something predicted to end ``predicted_seconds`` after
    it started, ``waited_seconds`` in.

    Before the predicted end: evenly spaced looks, at most FOLLOW_LONGEST_SECONDS apart, the
    last one on the predicted end (an end sooner than predicted is seen no later than with a
    fixed cadence of that length). From there: a quarter of how late it is by then, at least
    FOLLOW_SHORT_SECONDS and at most FOLLOW_LONGEST_SECONDS. An end near the prediction is thus
    seen within 15 s, one far past it within a quarter of its lateness (and 5 minutes), and a
    prediction hours short costs a look every 5 minutes, not every 15 s."""
    left = predicted_seconds - waited_seconds
    if left > 0:
        looks = -(-left // FOLLOW_LONGEST_SECONDS)
        return -(-left // looks)
    return min(FOLLOW_LONGEST_SECONDS, max(FOLLOW_SHORT_SECONDS, -left // 4))


ArrayName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")]
Consistency = Literal["crash", "fsfreeze"]
M = TypeVar("M", bound=BaseModel)


class BackupInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    array: ArrayName
    consistency: Consistency | None = None
    trigger: Literal["schedule", "manual"] = "manual"
    hooks: HooksChoice | None = None
    # Other arrays of the same instance whose sets are taken in the same CreateSnapshots call
    # (one point in time for all of them), each set its own.
    takeWith: Annotated[list[ArrayName], Field(min_length=1, max_length=8)] | None = None


def parse_input(model: type[M], data: Any) -> M:
    """Validate ``data``; the first problem becomes an InvalidInputError naming its field."""
    if not isinstance(data, dict):
        raise InvalidInputError("input", "the execution input must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "input"
        problem = first["msg"]
        if first["type"] == "extra_forbidden":
            problem = "unknown field"
        elif first["type"] == "string_pattern_mismatch":
            problem = f"{first['input']!r} does not match {first['ctx']['pattern']}"
        raise InvalidInputError(field, problem) from None


# Volume limits as the EC2 CreateVolume API reference gives them (botocore 1.44.5 service model,
# CreateVolume Iops/Throughput, checked 2026-11): gp3 3,000-80,000 IOPS and 125-2,000 MiB/s
# (older pages still say 16,000 and 1,000); io1 100-64,000 IOPS; io2 100-256,000 IOPS. Limits
# that depend on the size (IOPS per GiB) are left to EC2, whose refusal fails the run.
VolumeType = Literal["gp3", "gp2", "io1", "io2", "st1", "sc1", "standard"]
VOLUME_TYPES: tuple[str, ...] = get_args(VolumeType)
IOPS_RANGE: dict[str, tuple[int, int]] = {
    "gp3": (3000, 80000),
    "io1": (100, 64000),
    "io2": (100, 256000),
}
THROUGHPUT_RANGE: dict[str, tuple[int, int]] = {"gp3": (125, 2000)}
# What a volume of a given size may be provisioned with (Amazon EBS User Guide, "General Purpose
# SSD volumes" and "Provisioned IOPS SSD volumes"): gp3 at most 500 IOPS per GiB above its
# 3,000 baseline, and at most 0.25 MiB/s per provisioned IOPS above its 125 MiB/s baseline; io1
# at most 50 IOPS per GiB; io2 at most 1,000 IOPS per GiB.
IOPS_PER_GIB = {"gp3": 500, "io1": 50, "io2": 1000}
GP3_BASELINE_IOPS = 3000
GP3_BASELINE_THROUGHPUT = 125
GP3_MIB_PER_IOPS = 0.25


def iops_out_of_range(volume_type: str, iops: int) -> str | None:
    """Why EC2 refuses ``iops`` for every volume of this type (gp3, io1 and io2 only)."""
    low, high = IOPS_RANGE[volume_type]
    if low <= iops <= high:
        return None
    return f"{iops} is outside {low}..{high} for {volume_type}"


def performance_problem(
    volume_type: str, size_gib: int, iops: int | None, throughput: int | None
) -> tuple[str, str] | None:
    """The field and the reason EC2 would refuse this volume's IOPS or throughput, if it would."""
    per_gib = IOPS_PER_GIB.get(volume_type)
    floor = GP3_BASELINE_IOPS if volume_type == "gp3" else 0
    if per_gib is not None and iops is not None and iops > max(floor, per_gib * size_gib):
        return (
            "iops",
            f"{iops} IOPS on a {size_gib} GiB {volume_type} volume is more than {per_gib} per "
            f"GiB (at most {max(floor, per_gib * size_gib)}); give fewer IOPS",
        )
    if volume_type == "gp3" and throughput is not None and throughput > GP3_BASELINE_THROUGHPUT:
        provisioned = iops if iops is not None else GP3_BASELINE_IOPS
        if throughput > GP3_MIB_PER_IOPS * provisioned:
            return (
                "throughput",
                f"{throughput} MiB/s with {provisioned} IOPS is more than {GP3_MIB_PER_IOPS} MiB/s"
                f" per IOPS (at most {int(GP3_MIB_PER_IOPS * provisioned)}); give more iops or "
                "less throughput",
            )
    return None


# VolumeInitializationRate: 100-300 MiB/s (CreateVolume API reference).
INITIALIZATION_RATE_RANGE = (100, 300)

# The assemble and release documents' MountPoint pattern: an absolute path of plain segments,
# no "." or ".." segment, never "/" itself.
MOUNT_POINT_PATTERN = (
    r"^(/([A-Za-z0-9_-][A-Za-z0-9._-]{0,62}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,61}"
    r"|\.\.[A-Za-z0-9._-]{1,61})){1,16}$"
)

# Where a restored filesystem may never be mounted: "/", these system trees and everything under
# them, and these directories themselves (mounting over a whole /var or /home hides all that is
# in it; /var/lib/postgresql, /srv/db or /mnt/md0 are fine). Mounting over a system directory
# replaces the instance's own programs, configuration or credentials with whatever the snapshot
# holds, and a snapshot tag that anyone allowed to tag snapshots can set is enough to ask for it.
# The assemble, freeze and release scripts carry the same two lists (each script stands alone on
# the instance); test_ssm_documents checks that they agree with these.
SYSTEM_TREES = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root",
    "/run", "/sbin", "/sys", "/usr", "/tmp", "/var/tmp", "/var/run", "/var/lock", "/var/spool",
    "/var/log",
)  # fmt: skip
SYSTEM_DIRECTORIES = ("/var", "/home", "/opt", "/srv", "/mnt", "/media")


def system_directory(path: str, *, own: bool = False) -> str | None:
    """The system directory that ``path`` is or lies under, if a restore must not mount there;
    None when ``path`` is an acceptable mount point as far as this rule goes (its form is the
    pattern's business). ``path`` is normalized first, so "//etc/" or "/mnt/../etc" do not slip
    by when a caller forgot the pattern. ``own``: the path is the array's own mount point (a
    replace puts the array back where the instance released it from), where the directories
    themselves (/srv, /home, ...) are allowed; "/" and the trees never are."""
    normal = "/" + posixpath.normpath("/" + path).lstrip("/")
    if normal == "/":
        return "/"
    for tree in SYSTEM_TREES:
        if normal == tree or normal.startswith(tree + "/"):
            return tree
    if normal in SYSTEM_DIRECTORIES and not own:
        return normal
    return None


def normal_path(path: str) -> str:
    return "/" + posixpath.normpath("/" + path).lstrip("/")


def _not_a_system_directory(path: str) -> str:
    found = system_directory(path)
    if found is not None:
        inside = "is" if found == posixpath.normpath(path) else f"lies under {found}, which is"
        raise PydanticCustomError(
            "system_directory",
            "{path} {inside} a system directory: mounting the restored filesystem there would "
            "hide or replace the instance's own files; choose a directory of its own, such as "
            "/mnt/<array> or /data",
            {"path": repr(path), "inside": inside},
        )
    return path


def _not_in_a_system_tree(path: str) -> str:
    # The directories themselves are the restore's to judge: the set's own mount point may be
    # one of them in replace mode (plan.volumes.mount_point).
    return _not_a_system_directory(path) if system_directory(path, own=True) else path


MountPoint = Annotated[
    str,
    StringConstraints(pattern=MOUNT_POINT_PATTERN, max_length=201),
    AfterValidator(_not_a_system_directory),
]
RestoreMountPoint = Annotated[
    str,
    StringConstraints(pattern=MOUNT_POINT_PATTERN, max_length=201),
    AfterValidator(_not_in_a_system_tree),
]
SetId = Annotated[str, StringConstraints(pattern=r"^(latest|[A-Za-z0-9][A-Za-z0-9_.:-]{0,127})$")]
InstanceId = Annotated[str, StringConstraints(pattern=r"^i-[0-9a-f]{8,17}$")]
MdDevice = Annotated[str, StringConstraints(pattern=r"^/dev/md[0-9]{1,3}$")]
# mdadm's UUID as --detail and --examine print it: four groups of eight hex digits.
MD_UUID_PATTERN = r"^[0-9a-f]{8}(:[0-9a-f]{8}){3}$"
MdUuid = Annotated[str, StringConstraints(pattern=MD_UUID_PATTERN)]
Initialization = Literal["auto", "fsr", "rate", "prewarm", "none"]
RestoreMode = Literal["attach", "replace"]


class RestoreInput(BaseModel):
    """A restore request. Only ``array`` is required; what is left out comes from the set's
    tags, the stack's configuration, or the array's instance."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    array: ArrayName
    setId: SetId = "latest"
    targetInstanceId: InstanceId | None = None
    volumeType: VolumeType | None = None
    iops: int | None = None
    throughput: int | None = None
    initialization: Initialization | None = None
    initializationRate: int | None = None
    allowOptimizing: bool = False
    fsrTimeoutSeconds: int | None = None
    mountPoint: RestoreMountPoint | None = None
    # None: the device recorded with the set (raidsnap:md-device), else /dev/md0.
    mdDevice: MdDevice | None = None
    mdUuid: MdUuid | None = None
    # The md UUID the restored array gets (every restored array gets its own); None: the run
    # chooses one. A caller that must know it before the run ends (a drill) chooses it.
    newMdUuid: MdUuid | None = None
    readOnly: bool = False
    mode: RestoreMode = "attach"

    def check_combinations(self) -> None:
        """What pydantic's field types cannot say: which fields go together."""
        if self.iops is not None:
            if self.volumeType is not None and self.volumeType not in IOPS_RANGE:
                raise InvalidInputError(
                    "iops", f"only gp3, io1 and io2 volumes take iops, not {self.volumeType}"
                )
            out_of_range = iops_out_of_range(self.volumeType or "io2", self.iops)
            if out_of_range is not None:
                raise InvalidInputError("iops", out_of_range)
        if self.throughput is not None:
            if self.volumeType is not None and self.volumeType != "gp3":
                raise InvalidInputError(
                    "throughput", f"only gp3 volumes take throughput, not {self.volumeType}"
                )
            low, high = THROUGHPUT_RANGE["gp3"]
            if not low <= self.throughput <= high:
                raise InvalidInputError(
                    "throughput", f"{self.throughput} is outside {low}..{high} MiB/s"
                )
        if self.initializationRate is not None:
            if self.initialization not in (None, "rate", "auto"):
                raise InvalidInputError(
                    "initializationRate",
                    'is only used with "initialization": "rate" (or "auto", which may use it)',
                )
            low, high = INITIALIZATION_RATE_RANGE
            if not low <= self.initializationRate <= high:
                raise InvalidInputError(
                    "initializationRate",
                    f"{self.initializationRate} is outside {low}..{high} MiB/s",
                )
        if self.initialization == "rate" and self.initializationRate is None:
            raise InvalidInputError(
                "initializationRate", 'is required with "initialization": "rate"'
            )
        if self.fsrTimeoutSeconds is not None:
            if self.initialization not in (None, "fsr", "auto"):
                raise InvalidInputError(
                    "fsrTimeoutSeconds",
                    'is only used with "initialization": "fsr" (or "auto", which may use FSR)',
                )
            if not 60 <= self.fsrTimeoutSeconds <= 86400:
                raise InvalidInputError(
                    "fsrTimeoutSeconds", f"{self.fsrTimeoutSeconds} is outside 60..86400 seconds"
                )
        if self.allowOptimizing and self.initialization not in (None, "fsr"):
            raise InvalidInputError("allowOptimizing", 'is only used with "initialization": "fsr"')


def parse_restore_input(data: Any) -> RestoreInput:
    request = parse_input(RestoreInput, data)
    request.check_combinations()
    return request


# A drill assembles its copy away from the production array's usual /dev/md0 and mount point,
# so the drill instance's own arrays (if any) are never in the way.
DRILL_MOUNT_POINT = "/mnt/raidsnap-drill"
DRILL_MD_DEVICE = "/dev/md100"


class DrillInput(BaseModel):
    """A restore drill: the latest (or a given) set, restored read-only onto a drill instance,
    checked, and removed again."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    array: ArrayName
    targetInstanceId: InstanceId
    setId: SetId = "latest"
    mountPoint: MountPoint = DRILL_MOUNT_POINT
    mdDevice: MdDevice = DRILL_MD_DEVICE
    # rate needs a rate of its own; a drill measures the set, not the initialization.
    initialization: Literal["fsr", "prewarm", "none"] = "none"
    trigger: Literal["schedule", "manual"] = "manual"


def parse_drill_input(data: Any) -> DrillInput:
    return parse_input(DrillInput, data)
