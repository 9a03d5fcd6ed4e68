"""EC2 snapshots and the volumes made from them: snapshot progress on the virtual clock, the
per-volume snapshot rate, multi-volume snapshot sets of an instance, snapshots an AMI holds, and
CreateVolume (from a snapshot, with FSR credits, initialization rate and performance limits)."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from raidsnap_emulation.clock import VirtualClock
from raidsnap_emulation.double.base import (
    Answer,
    AwsError,
    Params,
    _constant,
    _matches,
    _page,
    _split_filters,
)
from raidsnap_emulation.double.fsr import Fsr
from raidsnap_emulation.double.locks import SnapshotLocks
from raidsnap_emulation.double.recycle_bin import RecycleBin
from raidsnap_emulation.double.volumes import Volumes, _Volume

SNAPSHOT_PER_VOLUME_INTERVAL_SECONDS = 15.0
MAX_EXCLUDED_DATA_VOLUMES = 40
"""EC2 refuses a second snapshot of one volume started within this many seconds."""


@dataclass
class _Snapshot:
    snapshot_id: str
    volume_id: str
    start: datetime
    fails: bool = False
    kms_key_id: str | None = None
    # A copy (copies.py): how long it takes, why it fails, and EC2's arbitrary volume id.
    seconds: float | None = None
    failure: str = "Snapshot creation failed: internal error"
    volume_shown: str | None = None


class Ec2(Volumes, Fsr, SnapshotLocks, RecycleBin):
    """CreateSnapshot(s), DescribeSnapshots, DeleteSnapshot, Register/DeregisterImage and
    CreateVolume, with the failures the tests mark on volumes and snapshots; snapshot locks
    (locks.py) and the Recycle Bin (recycle_bin.py) hold what DeleteSnapshot would remove."""

    def __init__(self, clock: VirtualClock, region: str = "us-east-1") -> None:
        super().__init__(clock, region)
        self.snapshot_seconds: float = 180.0
        self._snapshots: dict[str, _Snapshot] = {}
        self._last_snapshot_start: dict[str, datetime] = {}
        self._failing_snapshot_volumes: set[str] = set()
        self._failing_volume_snapshots: set[str] = set()
        self._client_tokens: dict[str, tuple[str, Answer]] = {}
        # Snapshot -> the image (AMI) whose block device mapping uses it.
        self._image_snapshots: dict[str, str] = {}
        # Where EBS's "EBS Multi-Volume Snapshots Completion Status" events go (the harness
        # hands them to EventBridge: raidsnap_emulation.events); None: nowhere.
        self.on_snapshots_done: Callable[[dict[str, Any]], object] | None = None
        self._handlers.update(
            {
                ("ec2", "CreateSnapshot"): self._create_snapshot,
                ("ec2", "CreateSnapshots"): self._create_snapshots,
                ("ec2", "DescribeSnapshots"): self._describe_snapshots,
                ("ec2", "DeleteSnapshot"): self._delete_snapshot,
                ("ec2", "RegisterImage"): self._register_image,
                ("ec2", "DeregisterImage"): self._deregister_image,
                ("ec2", "CreateVolume"): self._create_volume,
            }
        )

    def fail_snapshots(self, volume_id: str) -> None:
        """Snapshots of this volume, those still pending and those to come, end in error."""
        with self._lock:
            self._failing_snapshot_volumes.add(volume_id)
            now = self.clock.now()
            for snap in self._snapshots.values():
                if snap.volume_id == volume_id and self._snapshot_state(snap, now)[0] == "pending":
                    snap.fails = True

    def heal_snapshots(self, volume_id: str) -> None:
        """Snapshots of this volume taken from now on succeed again."""
        with self._lock:
            self._failing_snapshot_volumes.discard(volume_id)

    def fail_volumes(self, snapshot_id: str) -> None:
        """Volumes created from this snapshot from now on end in error."""
        with self._lock:
            self._failing_volume_snapshots.add(snapshot_id)

    def heal_volumes(self, snapshot_id: str) -> None:
        """Volumes created from this snapshot from now on become available again."""
        with self._lock:
            self._failing_volume_snapshots.discard(snapshot_id)

    def _seconds(self, snap: _Snapshot) -> float:
        """How long the snapshot takes (a copy has its own time)."""
        return self.snapshot_seconds if snap.seconds is None else snap.seconds

    def _snapshot_state(self, snap: _Snapshot, now: datetime) -> tuple[str, str]:
        elapsed = (now - snap.start).total_seconds()
        total = self._seconds(snap)
        if snap.fails and elapsed >= total / 2:
            return "error", "50%"
        if total <= 0 or elapsed >= total:
            return "completed", "100%"
        return "pending", f"{int(100 * elapsed / total)}%"

    def _check_snapshot_rate(self, volume_ids: list[str], now: datetime) -> None:
        for volume_id in volume_ids:
            last = self._last_snapshot_start.get(volume_id)
            if (
                last is not None
                and (now - last).total_seconds() < SNAPSHOT_PER_VOLUME_INTERVAL_SECONDS
            ):
                raise AwsError(
                    "SnapshotCreationPerVolumeRateExceeded",
                    "The maximum per volume CreateSnapshot request rate has been exceeded. "
                    "Use an increasing or variable sleep interval between requests.",
                )

    def _start_snapshot(
        self, volume_id: str, description: str, tags: list[dict[str, str]], now: datetime
    ) -> Answer:
        request: Params = {"VolumeId": volume_id, "Description": description}
        if tags:
            request["TagSpecifications"] = [{"ResourceType": "snapshot", "Tags": tags}]
        source_key = self._volume_view(self._moto_volume(volume_id)).get("KmsKeyId")
        answer = self._moto("ec2", "CreateSnapshot", request)
        snap = _Snapshot(
            answer["SnapshotId"],
            volume_id,
            now,
            fails=volume_id in self._failing_snapshot_volumes,
            kms_key_id=source_key,
        )
        self._snapshots[snap.snapshot_id] = snap
        self._last_snapshot_start[volume_id] = now
        return self._snapshot_view(answer)

    def _completes_at(self, snapshot_id: str) -> datetime:
        """When the snapshot is (or was) completed: a lock's duration starts then."""
        snap = self._snapshots.get(snapshot_id)
        if snap is None:
            return self.clock.now()
        return snap.start + timedelta(seconds=self.snapshot_seconds)

    def _restored_view(self, raw: Answer) -> Answer:
        return self._snapshot_view(raw)

    def _snapshot_view(self, moto_snapshot: dict[str, Any]) -> Answer:
        view = dict(moto_snapshot)
        view.pop("ResponseMetadata", None)
        snap = self._snapshots.get(view["SnapshotId"])
        if snap is not None:
            state, progress = self._snapshot_state(snap, self.clock.now())
            view.update(State=state, Progress=progress, StartTime=snap.start)
            if snap.kms_key_id and not view.get("KmsKeyId"):
                view["KmsKeyId"] = snap.kms_key_id
            if state == "error":
                view["StateMessage"] = snap.failure
            if snap.volume_shown is not None:
                view["VolumeId"] = snap.volume_shown
        return view

    def _create_snapshot(self, params: Params) -> Answer:
        now = self.clock.now()
        volume_id = params["VolumeId"]
        self._moto_volume(volume_id)
        self._check_snapshot_rate([volume_id], now)
        tags = [
            tag
            for spec in params.get("TagSpecifications", [])
            if spec.get("ResourceType") == "snapshot"
            for tag in spec.get("Tags", [])
        ]
        return self._start_snapshot(volume_id, params.get("Description", ""), tags, now)

    def _create_snapshots(self, params: Params) -> Answer:
        now = self.clock.now()
        spec = params["InstanceSpecification"]
        instance = self._instance(spec["InstanceId"])
        root = instance.get("RootDeviceName")
        excluded = set(spec.get("ExcludeDataVolumeIds", []))
        # "You can specify up to 40 volume IDs per request" (EC2 API Reference,
        # InstanceSpecification.ExcludeDataVolumeIds); the error code AWS gives is assumed.
        if len(spec.get("ExcludeDataVolumeIds", [])) > MAX_EXCLUDED_DATA_VOLUMES:
            raise AwsError(
                "InvalidParameterValue",
                f"ExcludeDataVolumeIds takes at most {MAX_EXCLUDED_DATA_VOLUMES} volume IDs.",
            )
        members: list[str] = []
        for mapping in instance.get("BlockDeviceMappings", []):
            volume_id = mapping["Ebs"]["VolumeId"]
            is_boot = mapping["DeviceName"] == root
            if is_boot and volume_id in excluded:
                raise AwsError(
                    "InvalidParameterValue",
                    f"The boot volume {volume_id} cannot be excluded with ExcludeDataVolumeIds; "
                    "use ExcludeBootVolume.",
                )
            if (is_boot and spec.get("ExcludeBootVolume")) or volume_id in excluded:
                continue
            members.append(volume_id)
        unknown = excluded - {m["Ebs"]["VolumeId"] for m in instance.get("BlockDeviceMappings", [])}
        if unknown:
            raise AwsError(
                "InvalidParameterValue",
                f"The volumes {sorted(unknown)} are not attached to instance {spec['InstanceId']}.",
            )
        self._check_snapshot_rate(members, now)
        spec_tags = [
            tag
            for tag_spec in params.get("TagSpecifications", [])
            if tag_spec.get("ResourceType") == "snapshot"
            for tag in tag_spec.get("Tags", [])
        ]
        snapshots = []
        for volume_id in members:
            tags = {t["Key"]: t["Value"] for t in spec_tags}
            if params.get("CopyTagsFromSource") == "volume":
                volume_tags = self._moto_volume(volume_id).get("Tags", [])
                copied = {
                    t["Key"]: t["Value"] for t in volume_tags if not t["Key"].startswith("aws:")
                }
                tags = {**copied, **tags}
            tag_list = [{"Key": k, "Value": v} for k, v in tags.items()]
            created = self._start_snapshot(volume_id, params.get("Description", ""), tag_list, now)
            snapshots.append(
                {
                    "SnapshotId": created["SnapshotId"],
                    "VolumeId": volume_id,
                    "VolumeSize": created.get("VolumeSize"),
                    "StartTime": now,
                    "State": created["State"],
                    "Progress": created["Progress"],
                    "OwnerId": created.get("OwnerId"),
                    "Encrypted": created.get("Encrypted", False),
                    "Description": params.get("Description", ""),
                    "Tags": tag_list,
                }
            )
        self._report_when_done([str(s["SnapshotId"]) for s in snapshots], now)
        return {"Snapshots": snapshots}

    # -- EBS's event for a CreateSnapshots call

    def _report_when_done(self, ids: list[str], started: datetime) -> None:
        """EBS sends "EBS Multi-Volume Snapshots Completion Status" to EventBridge once the
        call's snapshots are done: result ``succeeded`` with every snapshot, or ``failed`` with
        the snapshots in error (Amazon EBS User Guide, "Amazon EventBridge events for Amazon
        EBS", createSnapshots, whose examples this event follows, ARNs included). Here it is
        sent when the clock reaches the last snapshot's end, for a call made by an execution's
        function (a thread taking part in the clock): a call from a test moves no time. An
        execution that ended meanwhile waits for nothing: its call's event is not sent."""
        creator = threading.current_thread()
        label = self.clock.label_of(creator)
        if self.on_snapshots_done is None or label is None or not ids:
            return
        where = (self.region, self.account)
        timer = threading.Thread(
            target=self._send_when_done, args=(ids, started, label, where), daemon=True
        )
        timer.name = f"ebs-event-{ids[0]}"
        self.clock.enlist(timer)
        timer.start()

    def _send_when_done(
        self, ids: list[str], started: datetime, label: str, where: tuple[str, str]
    ) -> None:
        try:
            while True:
                with self._lock:
                    now = self.clock.now()
                    known = [self._snapshots[i] for i in ids if i in self._snapshots]
                    states = {s.snapshot_id: self._snapshot_state(s, now)[0] for s in known}
                    ends = [self._ends_at(s) for s in known if states[s.snapshot_id] == "pending"]
                if not ends:
                    break
                left = max((max(ends) - now).total_seconds(), 1.0)
                self.clock.sleep(left, ends_with=label)
                if self.clock.has_ended(label):
                    return
            failed = [i for i, state in states.items() if state == "error"]
            send = self.on_snapshots_done
            if send is not None:
                send(self._completion_event(failed or list(states), bool(failed), started, where))
        finally:
            self.clock.leave()

    def _ends_at(self, snap: _Snapshot) -> datetime:
        """When the snapshot is done: completed, or in error halfway (_snapshot_state)."""
        total = self._seconds(snap)
        return snap.start + timedelta(seconds=total / 2 if snap.fails else total)

    def _completion_event(
        self, ids: list[str], failed: bool, started: datetime, where: tuple[str, str]
    ) -> dict[str, Any]:
        region, account = where

        def arn(kind: str, resource: str) -> str:
            # As the guide's createSnapshots examples write them (the Region where the account
            # goes); raidsnap reads only what follows the last "/".
            return f"arn:aws:ec2::{region}:{kind}/{resource}"

        snaps = [self._snapshots[i] for i in ids]
        return {
            "version": "0",
            "id": f"createSnapshots-{ids[0]}",
            "detail-type": "EBS Multi-Volume Snapshots Completion Status",
            "source": "aws.ec2",
            "account": account,
            "time": self.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": region,
            "resources": [arn("snapshot", s.snapshot_id) for s in snaps],
            "detail": {
                "event": "createSnapshots",
                "result": "failed" if failed else "succeeded",
                "cause": f"Snapshot {ids[0]} is in status error" if failed else "",
                "request-id": "",
                "startTime": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "endTime": self.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
                "snapshots": [
                    {
                        "snapshot_id": arn("snapshot", s.snapshot_id),
                        "source": arn("volume", s.volume_id),
                        "status": "error" if failed else "completed",
                    }
                    for s in snaps
                ],
            },
        }

    def _describe_snapshots(self, params: Params) -> Answer:
        request, status_filters = _split_filters(params, {"status"})
        owners = set(request.pop("OwnerIds", []))
        moto_answer = self._moto("ec2", "DescribeSnapshots", request)
        account = os.environ.get("MOTO_ACCOUNT_ID", "123456789012")
        views = []
        self._empty_recycle_bin()
        for raw in moto_answer["Snapshots"]:
            if raw["SnapshotId"] in self._binned:
                continue
            if owners:
                owner_ok = (
                    raw.get("OwnerId") in owners
                    or ("self" in owners and raw.get("OwnerId") == account)
                    or ("amazon" in owners and raw.get("OwnerAlias") == "amazon")
                )
                if not owner_ok:
                    continue
            view = self._snapshot_view(raw)
            if _matches(status_filters, _constant([view["State"]])):
                views.append(view)
        page, token = _page(views, params)
        answer: Answer = {"Snapshots": page}
        if token:
            answer["NextToken"] = token
        return answer

    def _delete_snapshot(self, params: Params) -> Answer:
        snapshot_id = params["SnapshotId"]
        self.refuse_binned(snapshot_id)
        image = self._image_snapshots.get(snapshot_id)
        if image is not None:
            # EC2 refuses to delete a snapshot a registered AMI uses (EBS user guide, "Delete an
            # Amazon EBS snapshot"); the code and wording are EC2's (moto's InvalidSnapshotInUse).
            raise AwsError(
                "InvalidSnapshot.InUse",
                f"The snapshot {snapshot_id} is currently in use by {image}",
            )
        self.refuse_locked_delete(snapshot_id)
        if not self.to_recycle_bin(snapshot_id):
            self._moto("ec2", "DeleteSnapshot", {"SnapshotId": snapshot_id})
            self._snapshots.pop(snapshot_id, None)
        # FSR goes off for a snapshot deleted, into the Recycle Bin too ("Considerations for
        # Recycle Bin": fast snapshot restore is automatically disabled).
        now = self.clock.now()
        for pair in self._fsr.values():
            if pair.snapshot_id == snapshot_id and (pair.disabled is None or pair.disabled > now):
                if pair.disabling is None or pair.disabling > now:  # a failure still to come
                    pair.disabling = now
                    pair.failure_reason = None
                pair.disabled = now
        return {}

    def _register_image(self, params: Params) -> Answer:
        answer = self._moto("ec2", "RegisterImage", params)
        for mapping in params.get("BlockDeviceMappings", []):
            snapshot_id = (mapping.get("Ebs") or {}).get("SnapshotId")
            if snapshot_id:
                self._image_snapshots[snapshot_id] = str(answer["ImageId"])
        answer.pop("ResponseMetadata", None)
        return answer

    def _deregister_image(self, params: Params) -> Answer:
        answer = self._moto("ec2", "DeregisterImage", params)
        image = params["ImageId"]
        for snapshot_id in [s for s, i in self._image_snapshots.items() if i == image]:
            del self._image_snapshots[snapshot_id]
        answer.pop("ResponseMetadata", None)
        return answer

    def _create_volume(self, params: Params) -> Answer:
        now = self.clock.now()
        token = params.get("ClientToken")
        fingerprint = json.dumps(
            {k: v for k, v in params.items() if k not in ("ClientToken", "DryRun")},
            sort_keys=True,
            default=str,
        )
        if token and token in self._client_tokens:
            known, answer = self._client_tokens[token]
            if known != fingerprint:
                raise AwsError(
                    "IdempotentParameterMismatch",
                    "The client token you have provided is associated with a resource that is "
                    "already deleted or has different parameters. Please use a different client "
                    "token.",
                )
            with contextlib.suppress(AwsError):
                return self._volume_view(self._moto_volume(answer["VolumeId"]))
            return copy.deepcopy(answer)

        request = {
            k: v
            for k, v in params.items()
            if k not in ("ClientToken", "VolumeInitializationRate", "AvailabilityZoneId")
        }
        zones = self._zones_by_name()
        zone = params.get("AvailabilityZone")
        if zone is None and params.get("AvailabilityZoneId"):
            by_id = {zone_id: name for name, zone_id in zones.items()}
            zone = by_id.get(params["AvailabilityZoneId"])
            if zone is None:
                raise AwsError(
                    "InvalidParameterValue",
                    f"Invalid availability zone ID: [{params['AvailabilityZoneId']}]",
                )
            request["AvailabilityZone"] = zone
        if zone not in zones:
            raise AwsError("InvalidParameterValue", f"Invalid availability zone: [{zone}]")

        snapshot_id = params.get("SnapshotId")
        rate = params.get("VolumeInitializationRate")
        if rate is not None:
            if not snapshot_id:
                raise AwsError(
                    "InvalidParameterValue",
                    "VolumeInitializationRate can be specified only when creating a volume "
                    "from a snapshot.",
                )
            if not 100 <= int(rate) <= 300:
                raise AwsError(
                    "InvalidParameterValue",
                    f"Invalid value '{rate}' for VolumeInitializationRate. "
                    "Valid range is 100-300 MiB/s.",
                )
        kms_key_id = params.get("KmsKeyId")
        self._check_performance(params)
        fast_restored = False
        if snapshot_id:
            self.refuse_binned(snapshot_id)
            snapshot = self._snapshot_view(self._moto_snapshot(snapshot_id))
            snap = self._snapshots.get(snapshot_id)
            if snap is not None and self._snapshot_state(snap, now)[0] != "completed":
                raise AwsError(
                    "IncorrectState",
                    f"Snapshot '{snapshot_id}' is in state "
                    f"'{self._snapshot_state(snap, now)[0]}', not 'completed'.",
                )
            size = params.get("Size")
            if size is not None and int(size) < int(snapshot["VolumeSize"]):
                raise AwsError(
                    "InvalidParameterValue",
                    f"Volume of {size}GiB is too small; minimum is {snapshot['VolumeSize']}GiB.",
                )
            if snapshot.get("Encrypted") and not kms_key_id:
                kms_key_id = snapshot.get("KmsKeyId")
            pair = self._fsr.get((snapshot_id, str(zone)))
            fast_restored = pair is not None and self._fsr_take_credit(
                pair, now, int(snapshot["VolumeSize"])
            )

        answer = self._moto("ec2", "CreateVolume", request)
        vol = _Volume(
            volume_id=answer["VolumeId"],
            created=now,
            snapshot_id=snapshot_id,
            fails=bool(snapshot_id) and snapshot_id in self._failing_volume_snapshots,
            initialization_rate=int(rate) if rate is not None else None,
            fast_restored=fast_restored,
            kms_key_id=kms_key_id,
        )
        self._volumes[vol.volume_id] = vol
        view = self._volume_view(answer)
        if token:
            self._client_tokens[token] = (fingerprint, copy.deepcopy(view))
        return view

    def _check_performance(self, params: Params) -> None:
        """CreateVolume refuses IOPS or throughput out of proportion to the size (Amazon EBS
        User Guide: General Purpose SSD volumes, gp3 at most 500 IOPS per GiB and 0.25 MiB/s per
        IOPS above its 3,000 IOPS / 125 MiB/s baseline; Provisioned IOPS SSD volumes, io1 50 and
        io2 1,000 IOPS per GiB)."""
        volume_type = str(params.get("VolumeType") or "gp2")
        size = params.get("Size")
        if size is None and params.get("SnapshotId"):
            size = self._snapshot_view(self._moto_snapshot(params["SnapshotId"]))["VolumeSize"]
        if size is None:
            return
        gib = int(size)
        iops = int(params["Iops"]) if params.get("Iops") is not None else None
        per_gib = {"gp3": 500, "io1": 50, "io2": 1000}.get(volume_type)
        if per_gib is not None and iops is not None:
            allowed = max(3000 if volume_type == "gp3" else 0, per_gib * gib)
            if iops > allowed:
                raise AwsError(
                    "InvalidParameterValue",
                    f"Iops to volume size ratio of {iops / gib:.6f} is too high; maximum is "
                    f"{per_gib:.6f}",
                )
        throughput = params.get("Throughput")
        if volume_type == "gp3" and throughput is not None and int(throughput) > 125:
            provisioned = iops if iops is not None else 3000
            if int(throughput) > 0.25 * provisioned:
                raise AwsError(
                    "InvalidParameterValue",
                    f"Throughput (MiBps) to iops ratio of {int(throughput) / provisioned:.6f} is "
                    "too high; maximum is 0.250000 MiBps per iops",
                )
