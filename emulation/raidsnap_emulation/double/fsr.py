"""EC2 fast snapshot restore as it behaves: per (snapshot, AZ) pairs moving through enabling,
optimizing and enabled on the virtual clock, volume creation credits, the Region quota (also as
Service Quotas reports it), failures after an accepted enable, and what the pairs cost."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from raidsnap_emulation.clock import VirtualClock
from raidsnap_emulation.double.base import (
    Answer,
    AwsError,
    DoubleBase,
    Params,
    _lookup,
    _matches,
    _page,
)


@dataclass
class _FsrPair:
    snapshot_id: str
    zone: str
    owner_id: str
    enabling: datetime
    optimizing: datetime
    enabled: datetime
    disabling: datetime | None = None
    disabled: datetime | None = None
    # The enable failed on EC2's side: disabling/disabled with this reason, not the user's.
    failure_reason: str | None = None
    # Volume creation credits: the balance as of credits_at (None: the bucket has not started).
    credits: float = 0.0
    credits_at: datetime | None = None


_FSR_ORDER = {"enabling": 0, "optimizing": 1, "enabled": 2}

# Most SourceSnapshotIds one Enable/DisableFastSnapshotRestores call takes (see _fsr_targets).
FSR_MAX_SNAPSHOT_IDS = 10

# Service Quotas' EBS quota "Fast snapshot restore" (ebs / L-631ECBD3, default 5 per Region).
FSR_QUOTA_SERVICE_CODE = "ebs"

FSR_QUOTA_CODE = "L-631ECBD3"

FSR_QUOTA_ERROR = "ResourceLimitExceeded"

# StateTransitionReason of a pair whose enable failed (see fail_fsr_async).
FSR_FAILED_REASON = "Server.InternalError"


class Fsr(DoubleBase):
    """EnableFastSnapshotRestores, DisableFastSnapshotRestores, DescribeFastSnapshotRestores,
    and Service Quotas' GetServiceQuota for the FSR quota."""

    def __init__(self, clock: VirtualClock, region: str = "us-east-1") -> None:
        super().__init__(clock, region)
        self.fsr_enabling_seconds: float = 60.0
        self.fsr_optimizing_seconds_per_gib: float = 3600.0 / 1024.0
        self.fsr_disabling_seconds: float = 30.0
        # Snapshots that may have FSR on at once in the Region (any AZ): the account's applied
        # value of the quota, which GetServiceQuota reports. See _enable_fsr.
        self.fsr_region_limit: int = 5
        self._fsr: dict[tuple[str, str], _FsrPair] = {}
        # Every enablement ever made, for what FSR cost (a pair enabled again is a new one).
        self._fsr_history: list[_FsrPair] = []
        self._fsr_stuck: str | None = None
        # Snapshot -> seconds after enabling at which its enable fails (fail_fsr_async).
        self._fsr_failing: dict[str, float] = {}
        self._handlers.update(
            {
                ("ec2", "EnableFastSnapshotRestores"): self._enable_fsr,
                ("ec2", "DisableFastSnapshotRestores"): self._disable_fsr,
                ("ec2", "DescribeFastSnapshotRestores"): self._describe_fsr,
                ("service-quotas", "GetServiceQuota"): self._get_service_quota,
            }
        )

    def stick_fsr(self, state: str = "enabling") -> None:
        if state not in (*_FSR_ORDER, "disabling"):
            raise ValueError(f"FSR cannot stick in state {state!r}")
        with self._lock:
            self._fsr_stuck = state

    def fail_fsr_async(self, snapshot_id: str, after_seconds: float = 30.0) -> None:
        """The enable of this snapshot's FSR (in any AZ; pairs enabling now and those enabled
        from now on) fails on EC2's side ``after_seconds`` after it was accepted: the pair goes
        ``disabling``, then ``disabled``, with a StateTransitionReason that is not the user's.

        EC2 documents the failure ("disabling: A request was made to disable fast snapshot
        restore, or a request to enable fast snapshot restore failed", EBS User Guide, "Check
        the fast snapshot restore state") but lists only the two Client.UserInitiated reasons
        (API reference, DescribeFastSnapshotRestoreSuccessItem); the double reports
        FSR_FAILED_REASON, EC2's form of a server-side reason, which nothing relies on."""
        with self._lock:
            self._fsr_failing[snapshot_id] = after_seconds
            now = self.clock.now()
            for pair in self._fsr.values():
                pending = self._fsr_state(pair, now) in ("enabling", "optimizing")
                if pair.snapshot_id == snapshot_id and pending and pair.disabling is None:
                    self._fail_pair(pair, after_seconds)

    def _fail_pair(self, pair: _FsrPair, after_seconds: float) -> None:
        pair.disabling = pair.enabling + timedelta(seconds=after_seconds)
        pair.disabled = pair.disabling + timedelta(seconds=self.fsr_disabling_seconds)
        pair.failure_reason = FSR_FAILED_REASON

    def fsr_pair_hours(self) -> float:
        """Hours of FSR billed so far, summed over every enablement of every (snapshot, zone)
        pair: from enabling until it was disabled, or until now while still on (EBS pricing:
        per DSU-hour, billed per minute with a one-hour minimum, left to the reader)."""
        now = self.clock.now()
        with self._lock:
            return (
                sum(
                    ((min(p.disabling, now) if p.disabling else now) - p.enabling).total_seconds()
                    for p in self._fsr_history
                )
                / 3600
            )

    def _fsr_state(self, pair: _FsrPair, now: datetime) -> str:
        if pair.disabling is not None and now >= pair.disabling:
            if self._fsr_stuck == "disabling":
                return "disabling"
            return "disabled" if pair.disabled is not None and now >= pair.disabled else "disabling"
        state = "enabling"
        if now >= pair.optimizing:
            state = "optimizing"
        if now >= pair.enabled:
            state = "enabled"
        if self._fsr_stuck in _FSR_ORDER and _FSR_ORDER[state] > _FSR_ORDER[self._fsr_stuck]:
            state = self._fsr_stuck
        return state

    def _fsr_take_credit(self, pair: _FsrPair, now: datetime, size_gib: int) -> bool:
        """Spend one volume creation credit of the pair, if it has one: a volume is fast
        restored only then. One bucket per (snapshot, AZ) pair; it starts empty once the pair
        is enabled, fills at MIN(10, 1024 / snapshot GiB) credits an hour and holds at most
        MAX(1, MIN(10, 1024 / snapshot GiB)) (EBS User Guide, "Amazon EBS fast snapshot restore
        volume creation credits"; the guide does not say whether the filling starts at enabling
        or at enabled: the double starts at enabled, the later, so a restore that waits long
        enough here waits long enough in AWS)."""
        if self._fsr_state(pair, now) != "enabled":
            return False
        per_hour = min(10.0, 1024.0 / max(1, size_gib))
        cap = max(1.0, per_hour)
        since = pair.credits_at or pair.enabled
        balance = min(cap, pair.credits + per_hour * (now - since).total_seconds() / 3600)
        pair.credits_at = now
        if balance >= 1.0:
            pair.credits = balance - 1.0
            return True
        pair.credits = balance
        return False

    def _fsr_item(self, pair: _FsrPair, now: datetime) -> Answer:
        state = self._fsr_state(pair, now)
        item: Answer = {
            "SnapshotId": pair.snapshot_id,
            "AvailabilityZone": pair.zone,
            "AvailabilityZoneId": self._zones_by_name().get(pair.zone, ""),
            "State": state,
            "StateTransitionReason": pair.failure_reason
            if pair.failure_reason and state in ("disabling", "disabled")
            else "Client.UserInitiated"
            if state in ("enabling", "disabling")
            else "Client.UserInitiated - Lifecycle state transition",
            "OwnerId": pair.owner_id,
            "EnablingTime": pair.enabling,
        }
        reached = {"enabling": 0, "optimizing": 1, "enabled": 2, "disabling": 3, "disabled": 4}
        if pair.disabling is not None and now >= pair.disabling:
            for key, when in (("OptimizingTime", pair.optimizing), ("EnabledTime", pair.enabled)):
                if when <= pair.disabling:
                    item[key] = when
            item["DisablingTime"] = pair.disabling
            if state == "disabled":
                item["DisabledTime"] = pair.disabled
        else:
            if reached[state] >= 1:
                item["OptimizingTime"] = pair.optimizing
            if reached[state] >= 2:
                item["EnabledTime"] = pair.enabled
        return item

    def _fsr_targets(
        self, params: Params
    ) -> tuple[list[tuple[str, str, dict[str, Any] | None]], list[Answer]]:
        """The (snapshot, zone) pairs a FSR call names, and per-pair refusals.

        A call naming more than FSR_MAX_SNAPSHOT_IDS snapshots is refused as a whole with
        ``InvalidRequest`` (nothing changes): EC2 answered exactly that to an Enable of more than
        ten (pingcap/tidb issue #48505, "Number of values of parameter SourceSnapshotIds must be
        less than or equal to 10"). The API reference states no maximum for either call; Disable
        takes the same SourceSnapshotIds list and is held to the same bound."""
        if len(params["SourceSnapshotIds"]) > FSR_MAX_SNAPSHOT_IDS:
            raise AwsError(
                "InvalidRequest",
                "Number of values of parameter SourceSnapshotIds must be less than or equal to "
                f"{FSR_MAX_SNAPSHOT_IDS}.",
            )
        zones = self._zones_by_name()
        by_id = {zone_id: name for name, zone_id in zones.items()}
        requested = list(params.get("AvailabilityZones", [])) + [
            by_id.get(zone_id, zone_id) for zone_id in params.get("AvailabilityZoneIds", [])
        ]
        targets: list[tuple[str, str, dict[str, Any] | None]] = []
        failures: list[Answer] = []
        for snapshot_id in params["SourceSnapshotIds"]:
            errors = []
            try:
                snapshot: dict[str, Any] | None = self._moto_snapshot(snapshot_id)
            except AwsError:
                snapshot = None
            for zone in requested:
                if snapshot is None:
                    errors.append(
                        {
                            "AvailabilityZone": zone,
                            "Error": {
                                "Code": "InvalidSnapshot.NotFound",
                                "Message": f"The snapshot '{snapshot_id}' does not exist.",
                            },
                        }
                    )
                elif zone not in zones:
                    errors.append(
                        {
                            "AvailabilityZone": zone,
                            "Error": {
                                "Code": "InvalidParameterValue",
                                "Message": f"Invalid availability zone: [{zone}]",
                            },
                        }
                    )
                else:
                    targets.append((snapshot_id, zone, snapshot))
            if errors:
                failures.append(
                    {"SnapshotId": snapshot_id, "FastSnapshotRestoreStateErrors": errors}
                )
        return targets, failures

    def _fsr_active_snapshots(self, now: datetime) -> set[str]:
        """Snapshots with FSR on (enabling, optimizing or enabled) in any AZ of the Region."""
        return {
            pair.snapshot_id
            for pair in self._fsr.values()
            if self._fsr_state(pair, now) in _FSR_ORDER
        }

    def _enable_fsr(self, params: Params) -> Answer:
        """Enable each pair; a pair that would take the Region past ``fsr_region_limit``
        snapshots with FSR on is refused as an Unsuccessful entry, the others still enable.

        The quota counts snapshots, not pairs: "You can enable up to 5 snapshots for fast
        snapshot restore per Region" (EBS User Guide, fast snapshot restore, Considerations;
        adjustable: Service Quotas, EBS "Fast snapshot restore", L-631ECBD3). A snapshot already
        on in another AZ takes no further place. The error code EC2 puts in the entry is not
        documented and no recorded answer was found: the double uses ResourceLimitExceeded, the
        code the EC2 API reference's common client errors give for exceeding a resource limit,
        and the restore does not depend on it (any refusal makes it fall back)."""
        now = self.clock.now()
        targets, failures = self._fsr_targets(params)
        successful = []
        active = self._fsr_active_snapshots(now)
        refused: dict[str, list[Answer]] = {}
        for snapshot_id, zone, snapshot in targets:
            assert snapshot is not None
            pair = self._fsr.get((snapshot_id, zone))
            off = pair is None or self._fsr_state(pair, now) in ("disabling", "disabled")
            if off and snapshot_id not in active and len(active) >= self.fsr_region_limit:
                refused.setdefault(snapshot_id, []).append(
                    {
                        "AvailabilityZone": zone,
                        "Error": {
                            "Code": FSR_QUOTA_ERROR,
                            "Message": "You can enable fast snapshot restore for at most "
                            f"{self.fsr_region_limit} snapshots in this Region.",
                        },
                    }
                )
                continue
            active.add(snapshot_id)
            if off:
                optimizing = now + timedelta(seconds=self.fsr_enabling_seconds)
                optimise_for = self.fsr_optimizing_seconds_per_gib * int(
                    snapshot.get("VolumeSize", 0)
                )
                pair = _FsrPair(
                    snapshot_id,
                    zone,
                    str(snapshot.get("OwnerId", "")),
                    enabling=now,
                    optimizing=optimizing,
                    enabled=optimizing + timedelta(seconds=optimise_for),
                )
                self._fsr[(snapshot_id, zone)] = pair
                self._fsr_history.append(pair)
                if snapshot_id in self._fsr_failing:
                    self._fail_pair(pair, self._fsr_failing[snapshot_id])
            assert pair is not None
            successful.append(self._fsr_item(pair, now))
        failures += [
            {"SnapshotId": sid, "FastSnapshotRestoreStateErrors": errors}
            for sid, errors in refused.items()
        ]
        return {"Successful": successful, "Unsuccessful": failures}

    def _disable_fsr(self, params: Params) -> Answer:
        now = self.clock.now()
        targets, failures = self._fsr_targets(params)
        successful = []
        for snapshot_id, zone, snapshot in targets:
            pair = self._fsr.get((snapshot_id, zone))
            if pair is None:
                successful.append(
                    {
                        "SnapshotId": snapshot_id,
                        "AvailabilityZone": zone,
                        "State": "disabled",
                        "OwnerId": str((snapshot or {}).get("OwnerId", "")),
                    }
                )
                continue
            if self._fsr_state(pair, now) not in ("disabling", "disabled"):
                pair.disabling = now
                pair.disabled = now + timedelta(seconds=self.fsr_disabling_seconds)
                pair.failure_reason = None  # the user's disable came before any failure
            successful.append(self._fsr_item(pair, now))
        return {"Successful": successful, "Unsuccessful": failures}

    def _describe_fsr(self, params: Params) -> Answer:
        now = self.clock.now()
        filters = params.get("Filters", [])
        items = []
        for pair in self._fsr.values():
            item = self._fsr_item(pair, now)
            fields = {
                "availability-zone": [pair.zone],
                "snapshot-id": [pair.snapshot_id],
                "state": [item["State"]],
                "owner-id": [pair.owner_id],
            }
            if _matches(filters, _lookup(fields)):
                items.append(item)
        page, token = _page(items, params, default_size=200)
        answer: Answer = {"FastSnapshotRestores": page}
        if token:
            answer["NextToken"] = token
        return answer

    def _get_service_quota(self, params: Params) -> Answer:
        """GetServiceQuota for EBS's "Fast snapshot restore" quota (ebs / L-631ECBD3: the code
        as ListAWSDefaultServiceQuotas lists it, default 5.0, adjustable), at the value the
        double enforces; any other quota is moto's (which knows only vpc)."""
        if (params.get("ServiceCode"), params.get("QuotaCode")) != (
            FSR_QUOTA_SERVICE_CODE,
            FSR_QUOTA_CODE,
        ):
            return self._moto("service-quotas", "GetServiceQuota", params)
        account = self._moto("sts", "GetCallerIdentity", {})["Account"]
        return {
            "Quota": {
                "ServiceCode": FSR_QUOTA_SERVICE_CODE,
                "ServiceName": "Amazon Elastic Block Store (Amazon EBS)",
                "QuotaArn": f"arn:aws:servicequotas:{self.region}:{account}:"
                f"{FSR_QUOTA_SERVICE_CODE}/{FSR_QUOTA_CODE}",
                "QuotaCode": FSR_QUOTA_CODE,
                "QuotaName": "Fast snapshot restore",
                "Value": float(self.fsr_region_limit),
                "Unit": "None",
                "Adjustable": True,
                "GlobalQuota": False,
            }
        }
