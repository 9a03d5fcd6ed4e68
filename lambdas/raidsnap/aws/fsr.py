"""Fast Snapshot Restore for exactly a set's snapshots in exactly one Availability Zone: the
calls to EC2 and Service Quotas (the policy is raidsnap.plan.fsr)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from raidsnap import clients
from raidsnap.aws import error_code
from raidsnap.plan.fsr import (
    ACTIVE,
    DEFAULT_REGION_LIMIT,
    QUOTA_CODE,
    QUOTA_SERVICE_CODE,
    PairState,
    RegionLimit,
    active,
    batches,
)


@dataclass(frozen=True)
class Enabled:
    """EC2's answer to EnableFastSnapshotRestores: refusals as readable lines, and the
    EnablingTime of each pair it accepted (snapshot id -> ISO time)."""

    problems: list[str]
    enabling_times: dict[str, str]
    # Snapshots EC2 refused (listed in Unsuccessful): never turned on by this call.
    refused: tuple[str, ...] = ()


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
        now = answered_at(page)
        for item in page.get("FastSnapshotRestores", []):
            sid = item.get("SnapshotId", "")
            when = item.get("EnablingTime")
            state = str(item.get("State", ""))
            since = item.get(STATE_TIME.get(state, ""))
            out[sid] = PairState(
                snapshot_id=sid,
                state=state,
                enabling_time=when if isinstance(when, datetime) else None,
                reason=str(item.get("StateTransitionReason", "")),
                in_state_seconds=(
                    max(0.0, (now - since).total_seconds())
                    if now is not None and isinstance(since, datetime)
                    else None
                ),
            )
    return out


# The time each state began, as DescribeFastSnapshotRestores reports it (EC2 API Reference,
# DescribeFastSnapshotRestoreSuccessItem).
STATE_TIME = {"enabling": "EnablingTime", "optimizing": "OptimizingTime", "enabled": "EnabledTime"}


def answered_at(page: Any) -> datetime | None:
    """When EC2 answered, by its own clock: the response's Date header (RFC 9110, 6.6.1), so that
    the age of a state is told by one clock, never against the function's."""
    headers = (page.get("ResponseMetadata") or {}).get("HTTPHeaders") or {}
    try:
        return parsedate_to_datetime(str(headers["date"])) if "date" in headers else None
    except (TypeError, ValueError):
        return None


def already_active(snapshot_ids: Iterable[str], zone: str) -> set[str]:
    """Snapshots whose FSR in the zone is on (enabling, optimizing or enabled) right now."""
    return {sid for sid, pair in states(snapshot_ids, zone).items() if active(pair.state)}


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
        .paginate(Filters=[{"Name": "state", "Values": list(ACTIVE)}])
    )
    return {
        str(item.get("SnapshotId", ""))
        for page in pages
        for item in page.get("FastSnapshotRestores", [])
        if active(str(item.get("State", "")))
    }


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
