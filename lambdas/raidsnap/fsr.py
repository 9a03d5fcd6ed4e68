"""Fast Snapshot Restore for exactly a set's snapshots in exactly one Availability Zone."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from botocore.exceptions import BotoCoreError, ClientError

from raidsnap import clients
from raidsnap.aws import error_code

# EC2 documents FSR optimisation at about 60 minutes per TiB of snapshot data.
OPTIMIZING_SECONDS_PER_GIB = 3600.0 / 1024.0
# Enabling usually takes about a minute.
ENABLING_SECONDS = 60.0
MIN_WAIT_SECONDS = 15
MAX_WAIT_SECONDS = 300

_ACTIVE = ("enabling", "optimizing", "enabled")
# EC2 refuses a whole Enable/DisableFastSnapshotRestores call that names more than ten snapshots
# (InvalidRequest: "Number of values of parameter SourceSnapshotIds must be less than or equal to
# 10."), so every call names at most this many.
MAX_IDS_PER_CALL = 10
# "You can enable up to 5 snapshots for fast snapshot restore per Region" (EBS User Guide, fast
# snapshot restore, Considerations), adjustable: Service Quotas' EBS quota "Fast snapshot
# restore", code L-631ECBD3.
QUOTA_SERVICE_CODE = "ebs"
QUOTA_CODE = "L-631ECBD3"
DEFAULT_REGION_LIMIT = 5


@dataclass(frozen=True)
class PairState:
    snapshot_id: str
    state: str
    enabling_time: datetime | None = None
    # EC2's StateTransitionReason: Client.UserInitiated..., or why an enable failed.
    reason: str = ""


@dataclass(frozen=True)
class Enabled:
    """EC2's answer to EnableFastSnapshotRestores: refusals as readable lines, and the
    EnablingTime of each pair it accepted (snapshot id -> ISO time)."""

    problems: list[str]
    enabling_times: dict[str, str]
    # Snapshots EC2 refused (listed in Unsuccessful): never turned on by this call.
    refused: tuple[str, ...] = ()


def pair_key(snapshot_id: str, zone: str) -> str:
    return f"{snapshot_id}@{zone}"


def states(snapshot_ids: Iterable[str], zone: str) -> dict[str, PairState]:
    """The FSR state of each snapshot in the zone; absent snapshots have none."""
    ids = list(snapshot_ids)
    out: dict[str, PairState] = {}
    if not ids:
        return out
    pages = (
        clients.ec2()
        .get_paginator("describe_fast_snapshot_restores")
        .paginate(
            Filters=[
                {"Name": "snapshot-id", "Values": ids},
                {"Name": "availability-zone", "Values": [zone]},
            ]
        )
    )
    for page in pages:
        for item in page.get("FastSnapshotRestores", []):
            sid = item.get("SnapshotId", "")
            when = item.get("EnablingTime")
            out[sid] = PairState(
                snapshot_id=sid,
                state=str(item.get("State", "")),
                enabling_time=when if isinstance(when, datetime) else None,
                reason=str(item.get("StateTransitionReason", "")),
            )
    return out


def already_active(snapshot_ids: Iterable[str], zone: str) -> set[str]:
    """Snapshots whose FSR in the zone is on (enabling, optimizing or enabled) right now."""
    return {sid for sid, pair in states(snapshot_ids, zone).items() if active(pair.state)}


@dataclass(frozen=True)
class RegionLimit:
    """How many snapshots may have FSR on at once in this Region, and, when Service Quotas did
    not say, why the default was assumed."""

    snapshots: int
    assumed_because: str | None = None


def region_limit() -> RegionLimit:
    """The account's applied value of the FSR quota; the documented default when Service Quotas
    cannot be asked (no permission, an endpoint not reachable, a quota it does not know)."""
    try:
        quota = clients.servicequotas().get_service_quota(
            ServiceCode=QUOTA_SERVICE_CODE, QuotaCode=QUOTA_CODE
        )["Quota"]
        return RegionLimit(int(quota["Value"]))
    except ClientError as err:
        why = f"{error_code(err)}: {err.response.get('Error', {}).get('Message', '')}"
    except (BotoCoreError, KeyError, TypeError, ValueError) as err:
        why = f"{type(err).__name__}: {err}"
    return RegionLimit(DEFAULT_REGION_LIMIT, why)


def active_in_region() -> set[str]:
    """Snapshots with FSR on (enabling, optimizing or enabled) in any AZ of the Region: each
    takes one place of the quota, however many AZs it is on in."""
    pages = (
        clients.ec2()
        .get_paginator("describe_fast_snapshot_restores")
        .paginate(Filters=[{"Name": "state", "Values": list(_ACTIVE)}])
    )
    return {
        str(item.get("SnapshotId", ""))
        for page in pages
        for item in page.get("FastSnapshotRestores", [])
        if active(str(item.get("State", "")))
    }


def active(state: str) -> bool:
    """Billed: FSR costs from enabling until it is disabled."""
    return state in _ACTIVE


def batches(snapshot_ids: list[str]) -> list[list[str]]:
    """The ids in calls EC2 accepts: MAX_IDS_PER_CALL at most each, in the order given."""
    return [
        snapshot_ids[i : i + MAX_IDS_PER_CALL]
        for i in range(0, len(snapshot_ids), MAX_IDS_PER_CALL)
    ]


def enable(snapshot_ids: list[str], zone: str) -> Enabled:
    """Enable FSR; EC2's refusals (a limit, a snapshot not ours) come back as readable lines."""
    problems = []
    refused: list[str] = []
    times: dict[str, str] = {}
    for batch in batches(snapshot_ids):
        answer = clients.ec2().enable_fast_snapshot_restores(
            AvailabilityZones=[zone], SourceSnapshotIds=batch
        )
        for item in answer.get("Unsuccessful", []):
            refused.append(str(item.get("SnapshotId", "")))
            for err in item.get("FastSnapshotRestoreStateErrors", []):
                detail = err.get("Error", {})
                problems.append(
                    f"{item.get('SnapshotId')}: {detail.get('Code')}: {detail.get('Message')}"
                )
        times |= {
            str(item["SnapshotId"]): item["EnablingTime"].isoformat()
            for item in answer.get("Successful", [])
            if isinstance(item.get("EnablingTime"), datetime)
        }
    return Enabled(problems, times, tuple(refused))


def disable(snapshot_ids: list[str], zone: str) -> None:
    for batch in batches(snapshot_ids):
        clients.ec2().disable_fast_snapshot_restores(
            AvailabilityZones=[zone], SourceSnapshotIds=batch
        )


def usable(state: str, allow_optimizing: bool) -> bool:
    return state == "enabled" or (allow_optimizing and state == "optimizing")


def credit_seconds(size_gib: int) -> float:
    """How long after a pair is enabled its volume creation credit bucket (empty at first)
    holds one credit: it fills at MIN(10, 1024 / snapshot GiB) credits an hour (EBS User Guide,
    "Amazon EBS fast snapshot restore volume creation credits"). A volume created from a pair
    without a credit is not fast restored."""
    return 3600.0 / min(10.0, 1024.0 / max(1, size_gib))


def seconds_left(state: str | None, size_gib: int, spent_in_state: float) -> float:
    """What EC2's published pace says a pair still needs before it is enabled, given how long
    the workflow has already waited since it first saw the pair in this state. Time is counted
    in waited seconds, never read from a clock, so a retried step does not shorten it."""
    optimizing = size_gib * OPTIMIZING_SECONDS_PER_GIB
    if state in (None, "enabling"):
        return max(0.0, ENABLING_SECONDS - spent_in_state) + optimizing
    if state == "optimizing":
        return max(0.0, optimizing - spent_in_state)
    return 0.0
