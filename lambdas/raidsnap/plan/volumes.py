"""A restore's volumes as they will be created: one spec per member, from the input and what
the set recorded, checked against what EC2 accepts before anything is created."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from raidsnap import tags
from raidsnap.errors import IncompleteSnapshotSetError, InvalidInputError
from raidsnap.models import (
    IOPS_RANGE,
    MD_UUID_PATTERN,
    MOUNT_POINT_PATTERN,
    THROUGHPUT_RANGE,
    VOLUME_TYPES,
    RestoreInput,
    iops_out_of_range,
    normal_path,
    performance_problem,
    system_directory,
)

if TYPE_CHECKING:
    from raidsnap.sets import SetMember, SnapshotSet

MAX_MEMBERS = 40  # the assemble document's VolumeIds pattern takes at most 40 ids
DEFAULT_VOLUME_TYPE = "gp3"


@dataclass(frozen=True)
class VolumeSpec:
    """One member's volume as it will be created."""

    index: int
    snapshot_id: str
    volume_type: str
    iops: int | None
    throughput: int | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "snapshotId": self.snapshot_id,
            "volumeType": self.volume_type,
            "iops": self.iops,
            "throughput": self.throughput,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> VolumeSpec:
        return cls(
            index=int(raw["index"]),
            snapshot_id=str(raw["snapshotId"]),
            volume_type=str(raw["volumeType"]),
            iops=None if raw.get("iops") is None else int(raw["iops"]),
            throughput=None if raw.get("throughput") is None else int(raw["throughput"]),
        )


class Attachment(NamedTuple):
    """One attachment of a volume, as DescribeVolumes shows it."""

    instance_id: str
    device: str
    state: str


@dataclass(frozen=True)
class VolumeView:
    volume_id: str
    state: str
    attachments: tuple[Attachment, ...]
    fast_restored: bool
    tags: Mapping[str, str]

    def on(self, instance_id: str) -> Attachment | None:
        """Its attachment to ``instance_id``, in whatever state, if it has one."""
        return next((a for a in self.attachments if a.instance_id == instance_id), None)


def run_nonce(execution_arn: str, start: str | int | datetime, secret: bytes) -> str:
    """The nonce of one run of an execution: an HMAC of its ARN and its start time (to the
    millisecond, as Step Functions reports it everywhere: the context object's StartTime,
    DescribeExecution's startDate, the status change event's startDate in epoch ms) under the
    deployment's ``secret`` (raidsnap.aws.run_secret). Execution names are unique for 90 days
    only, so the ARN alone may name an earlier run whose volumes are a live array; the start
    time tells the runs apart. Without the secret nobody can compute it from what Step
    Functions shows, so nobody can tag a volume of their own as a run's."""
    if not secret:
        raise ValueError("a run nonce needs the deployment's secret")
    if isinstance(start, datetime):
        when = start
    elif isinstance(start, int):
        when = datetime.fromtimestamp(start / 1000, UTC)
    else:
        when = datetime.fromisoformat(start.replace("Z", "+00:00"))
    millis = int(when.timestamp() * 1000)
    message = f"{execution_arn}@{millis}".encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()[:16]


def client_token(execution_arn: str, run: str, index: int) -> str:
    """Same run and member, same token: a retried CreateVolume returns the first volume, and a
    later execution of the same name (another run) never gets an earlier run's volume back.
    EC2 allows 64 characters; a hash keeps long execution ARNs within that."""
    digest = hashlib.sha256(f"{execution_arn}#{run}#{index}".encode()).hexdigest()
    return f"raidsnap-{digest[:48]}"


def owned_by(view: VolumeView, execution_arn: str, run: str) -> bool:
    """Did this run create the volume? Both tags must say so."""
    return bool(run) and (
        view.tags.get(tags.RESTORE_EXECUTION) == execution_arn
        and view.tags.get(tags.RESTORE_RUN) == run
    )


def member_specs(
    request: RestoreInput, snapshot_set: SnapshotSet, notes: list[str]
) -> list[dict[str, Any]]:
    """Each member's volume: the input's type and performance, else what the member's snapshot
    recorded, else gp3; refused (InvalidInputError) where EC2 would refuse it."""
    if len(snapshot_set.members) > MAX_MEMBERS:
        raise IncompleteSnapshotSetError(
            f"set {snapshot_set.set_id} has {len(snapshot_set.members)} members; "
            f"raidsnap assembles at most {MAX_MEMBERS}"
        )
    return [_member_spec(request, m, notes) for m in snapshot_set.by_index()]


def _member_spec(request: RestoreInput, m: SetMember, notes: list[str]) -> dict[str, Any]:
    recorded_type = m.tags.get(tags.VOLUME_TYPE)
    volume_type = request.volumeType or recorded_type or DEFAULT_VOLUME_TYPE
    if volume_type not in VOLUME_TYPES:
        notes.append(f"member {m.index}: recorded volume type {volume_type!r} unknown; gp3")
        volume_type = DEFAULT_VOLUME_TYPE
    same_type = recorded_type == volume_type
    iops: int | None = request.iops
    if iops is None and same_type and volume_type in IOPS_RANGE:
        iops = _int_tag(m.tags.get(tags.IOPS))
    throughput: int | None = request.throughput
    if throughput is None and same_type and volume_type in THROUGHPUT_RANGE:
        throughput = _int_tag(m.tags.get(tags.THROUGHPUT))
    if request.iops is not None:
        if volume_type not in IOPS_RANGE:
            raise InvalidInputError(
                "iops", f"the volumes are {volume_type}, which takes no iops; give volumeType"
            )
        out_of_range = iops_out_of_range(volume_type, request.iops)
        if out_of_range is not None:
            raise InvalidInputError("iops", out_of_range)
    if request.throughput is not None and volume_type != "gp3":
        raise InvalidInputError(
            "throughput", f"the volumes are {volume_type}; only gp3 takes throughput"
        )
    if volume_type in ("io1", "io2") and iops is None:
        iops = IOPS_RANGE["gp3"][0]
        notes.append(f"member {m.index}: no IOPS recorded for {volume_type}; {iops} used")
    problem = performance_problem(volume_type, m.size_gib, iops, throughput)
    if problem is not None:
        field, reason = problem
        raise InvalidInputError(field, f"member {m.index}: {reason}")
    spec = VolumeSpec(m.index or 0, m.snapshot_id, volume_type, iops, throughput)
    own_tags = {
        k: v for k, v in m.tags.items() if not k.startswith((tags.PREFIX, "aws:")) and k != "Name"
    }
    return spec.as_dict() | {"sizeGib": m.size_gib, "tags": own_tags}


def _int_tag(raw: str | None) -> int | None:
    return int(raw) if raw and raw.isdigit() else None


def md_uuid(request: RestoreInput, snapshot_set: SnapshotSet) -> str:
    """The input's mdUuid, else the one the set recorded; a set without one cannot be
    assembled by UUID, so the operator must give it."""
    found = request.mdUuid or snapshot_set.tag_values.get(tags.MD_UUID, "")
    if not re.fullmatch(MD_UUID_PATTERN, found):
        raise InvalidInputError(
            "mdUuid",
            f"set {snapshot_set.set_id} records no md UUID (it was taken without on-instance "
            "discovery); give the array's UUID as mdUuid (mdadm --detail or --examine shows it)",
        )
    return found


def mount_point(
    request: RestoreInput, snapshot_set: SnapshotSet, notes: list[str]
) -> tuple[str, bool]:
    """The input's mountPoint, else the set's tag, else /mnt/<array>; and whether it is the
    array's own mount point (replace mode onto the one the set recorded).

    A system directory is never a new mount point. The trees (/etc, /usr, ...) are refused
    always; a directory itself (/srv, /home, /opt, ...) only when it is not the array's own: a
    replace puts the array back where the instance's release document found it mounted (release
    refuses a mount point that does not hold the array's md device), so there it hides nothing
    it did not hide before. Anywhere else (attach mode, another instance, another directory) it
    would hide what the directory holds.

    A tag naming a system directory otherwise is refused rather than replaced by the default:
    whoever may tag snapshots may set it, so it is either a mistake or an attempt to mount a
    snapshot's contents over the instance's own files, and a restore that quietly mounts
    elsewhere would hide both and leave an fstab line nobody asked for. The operator decides by
    passing mountPoint. The tag is checked as it would be read, normalized, so "/etc/" or "//etc"
    count as /etc. A tag that is not a usable path otherwise (garbled, or relative) is harmless:
    the default is used, with a note."""
    default = f"/mnt/{request.array}"  # below /mnt: array names start with a letter or digit
    tagged, recorded = _recorded_mount_point(snapshot_set, notes)

    def own(path: str) -> bool:
        return request.mode == "replace" and normal_path(path) == recorded

    if request.mountPoint is not None:
        found = system_directory(request.mountPoint, own=own(request.mountPoint))
        if found is not None:
            raise InvalidInputError(
                "mountPoint",
                f"{request.mountPoint!r} is the system directory {found}: mounting the restored "
                "filesystem there would hide the instance's own files; choose a directory of its "
                "own, such as /mnt/<array> or /data (only a replace may put an array back on "
                f"the system directory it was mounted at, which set {snapshot_set.set_id} "
                f"recorded as {tagged or 'nothing'}). Nothing was changed",
            )
        return request.mountPoint, own(request.mountPoint)
    found = system_directory(tagged, own=own(tagged)) if tagged else None
    if found is not None:
        where = (
            "a replace may put the array back there, but this is an attach restore"
            if system_directory(tagged, own=True) is None
            else "a restore never mounts over a system tree"
        )
        raise InvalidInputError(
            "mountPoint",
            f"no mountPoint was given and the {tags.MOUNT_POINT} tag of set "
            f"{snapshot_set.set_id} holds {tagged!r}, which is or lies under the system "
            f"directory {found}; {where}. Pass mountPoint explicitly (for example "
            f"{default!r}). Nothing was changed",
        )
    if re.fullmatch(MOUNT_POINT_PATTERN, tagged):
        return tagged, own(tagged)
    if tagged:
        notes.append(f"the set's mount point {tagged!r} is not usable; mounted at {default}")
    else:
        notes.append(f"the set records no mount point; mounted at {default}")
    return default, False


def _recorded_mount_point(snapshot_set: SnapshotSet, notes: list[str]) -> tuple[str, str | None]:
    """Where the set says the array was mounted, and that place normalized when the backup's
    own record (the manifest) says so. The manifest wins over the tag, which anyone allowed to
    tag snapshots may change; only the manifest's record makes a mount point the array's own,
    except for a set recorded before manifests kept md facts, whose tag is all there is."""
    tagged = snapshot_set.tag_values.get(tags.MOUNT_POINT, "")
    in_manifest = snapshot_set.recorded_md.get("mountPoint", "")
    if not snapshot_set.recorded_md:
        # A set recorded before the manifest kept md facts: its tag, as then. The scripts still
        # refuse a system directory with files in it as the array's own (MountPointNotEmpty).
        legacy = re.fullmatch(MOUNT_POINT_PATTERN, tagged) is not None
        return tagged, normal_path(tagged) if legacy else None
    if in_manifest and in_manifest != tagged:
        if tagged:
            notes.append(
                f"the set's {tags.MOUNT_POINT} tag says {tagged!r}, but its record says "
                f"{in_manifest!r}: the record is used"
            )
        tagged = in_manifest
    usable = bool(in_manifest) and re.fullmatch(MOUNT_POINT_PATTERN, in_manifest) is not None
    return tagged, normal_path(in_manifest) if usable else None


def recovery_mount_problem(recorded: str, recovery: Mapping[str, str]) -> str | None:
    """Why the configured automated recovery of an array could never mount a set that recorded
    ``recorded`` as its mount point (None: it could). A recovery with a mountPoint of its own was
    checked at synth. Otherwise it mounts where the set recorded: never in a system tree, and at
    a system directory itself (/srv, /home, ...) only when it replaces the array in place; a
    recovery onto another instance (mode attach, a replacement, an Auto Scaling launch) mounts
    there anew and is refused (mount_point)."""
    if not recovery or recovery.get("mountPoint") or not recorded:
        return None
    tree = system_directory(recorded, own=True)
    if tree is not None:
        return (
            f"its sets record the mount point {recorded}, in the system tree {tree}: no restore "
            "mounts there, so every automated recovery would fail; set recovery.mountPoint"
        )
    moves = [
        what
        for what, given in (
            ("mode attach", recovery.get("mode") == "attach"),
            (
                f"replacementInstanceId {recovery.get('replacementInstanceId')}",
                bool(recovery.get("replacementInstanceId")),
            ),
            (
                f"autoScalingGroup {recovery.get('autoScalingGroup')}",
                bool(recovery.get("autoScalingGroup")),
            ),
        )
        if given
    ]
    if system_directory(recorded) is not None and moves:
        return (
            f"its sets record the mount point {recorded}, a system directory itself: a recovery "
            f"in place puts the array back there, but one onto another instance "
            f"({', '.join(moves)}) would mount it there anew and be refused; set "
            "recovery.mountPoint to a directory of its own (such as /srv/<array>)"
        )
    return None
