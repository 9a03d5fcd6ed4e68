"""EBS volumes as EC2 shows them after they exist: creating then available on the virtual clock,
attaching and detaching taking time, deletion, and tag removal."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from raidsnap_emulation.clock import VirtualClock
from raidsnap_emulation.double.base import (
    Answer,
    AwsError,
    DoubleBase,
    Params,
    _matches,
    _page,
    _split_filters,
)


@dataclass
class _Volume:
    volume_id: str
    created: datetime
    snapshot_id: str | None
    fails: bool
    initialization_rate: int | None
    fast_restored: bool
    kms_key_id: str | None


@dataclass
class _Attachment:
    volume_id: str
    instance_id: str
    device: str
    since: datetime
    detaching: bool = False
    # The Region and account the volume is in (the call that attached or detached it).
    where: tuple[str, str] = ("us-east-1", "123456789012")


class Volumes(DoubleBase):
    """DescribeVolumes, AttachVolume, DetachVolume, DeleteVolume, DeleteTags (CreateVolume, which
    starts from a snapshot and FSR, is in ec2.py)."""

    def __init__(self, clock: VirtualClock, region: str = "us-east-1") -> None:
        super().__init__(clock, region)
        self.volume_seconds: float = 10.0
        self.attach_seconds: float = 3.0
        self.detach_seconds: float = 5.0
        self._volumes: dict[str, _Volume] = {}
        self._attachments: dict[str, _Attachment] = {}
        self._handlers.update(
            {
                ("ec2", "DescribeVolumes"): self._describe_volumes,
                ("ec2", "AttachVolume"): self._attach_volume,
                ("ec2", "DetachVolume"): self._detach_volume,
                ("ec2", "DeleteVolume"): self._delete_volume,
                ("ec2", "DeleteTags"): self._delete_tags,
            }
        )

    def _volume_state(self, vol: _Volume, moto_state: str, now: datetime) -> str:
        elapsed = (now - vol.created).total_seconds()
        if elapsed < self.volume_seconds:
            return "creating"
        if vol.fails:
            return "error"
        return moto_state

    def _volume_view(self, raw: dict[str, Any]) -> Answer:
        view = dict(raw)
        view.pop("ResponseMetadata", None)
        now = self.clock.now()
        vol = self._volumes.get(view["VolumeId"])
        if vol is not None:
            view["State"] = self._volume_state(vol, view.get("State", "available"), now)
            view["CreateTime"] = vol.created
            view["FastRestored"] = vol.fast_restored
            if vol.initialization_rate is not None:
                view["VolumeInitializationRate"] = vol.initialization_rate
            if vol.kms_key_id and not view.get("KmsKeyId"):
                view["KmsKeyId"] = vol.kms_key_id
        attachments = []
        for attachment in view.get("Attachments", []):
            item = dict(attachment)
            ours = self._attachments.get(view["VolumeId"])
            if ours is not None:
                item["AttachTime"] = ours.since
                if ours.detaching:
                    item["State"] = "detaching"
                elif (now - ours.since).total_seconds() < self.attach_seconds:
                    item["State"] = "attaching"
                else:
                    item["State"] = "attached"
            attachments.append(item)
        view["Attachments"] = attachments
        return view

    def _settle_detachments(self) -> None:
        now = self.clock.now()
        for volume_id, ours in list(self._attachments.items()):
            if ours.detaching and (now - ours.since).total_seconds() >= self.detach_seconds:
                with self.calls_in(*ours.where):
                    self._moto(
                        "ec2",
                        "DetachVolume",
                        {
                            "VolumeId": volume_id,
                            "InstanceId": ours.instance_id,
                            "Device": ours.device,
                        },
                    )
                del self._attachments[volume_id]

    def _describe_volumes(self, params: Params) -> Answer:
        request, ours = _split_filters(params, {"status", "attachment.status"})
        views = [
            self._volume_view(v) for v in self._moto("ec2", "DescribeVolumes", request)["Volumes"]
        ]

        def values(view: Answer) -> Callable[[str], list[str]]:
            def of(name: str) -> list[str]:
                if name == "status":
                    return [view["State"]]
                return [a["State"] for a in view["Attachments"]]

            return of

        kept = [v for v in views if _matches(ours, values(v))]
        page, token = _page(kept, params, default_size=500)
        answer: Answer = {"Volumes": page}
        if token:
            answer["NextToken"] = token
        return answer

    def _attach_volume(self, params: Params) -> Answer:
        now = self.clock.now()
        volume_id, instance_id, device = params["VolumeId"], params["InstanceId"], params["Device"]
        volume = self._volume_view(self._moto_volume(volume_id))
        instance = self._instance(instance_id)
        if volume["State"] == "in-use":
            raise AwsError("VolumeInUse", f"{volume_id} is already attached to an instance")
        if volume["State"] != "available":
            raise AwsError(
                "IncorrectState", f"Volume '{volume_id}' is in the '{volume['State']}' state."
            )
        instance_state = instance.get("State", {}).get("Name")
        if instance_state not in ("running", "stopped", "pending"):
            raise AwsError(
                "IncorrectInstanceState",
                f"The instance '{instance_id}' is not in the 'running' or 'stopped' state.",
            )
        if volume["AvailabilityZone"] != instance.get("Placement", {}).get("AvailabilityZone"):
            raise AwsError(
                "InvalidVolume.ZoneMismatch",
                f"The volume '{volume_id}' is not in the same availability zone as instance "
                f"'{instance_id}'",
            )
        if any(m["DeviceName"] == device for m in instance.get("BlockDeviceMappings", [])):
            raise AwsError(
                "InvalidParameterValue",
                f"Invalid value '{device}' for unixDevice. Attachment point {device} is already "
                "in use",
            )
        answer = self._moto(
            "ec2",
            "AttachVolume",
            {"VolumeId": volume_id, "InstanceId": instance_id, "Device": device},
        )
        self._attachments[volume_id] = _Attachment(
            volume_id, instance_id, device, now, where=(self.region, self.account)
        )
        answer.pop("ResponseMetadata", None)
        answer.update(State="attaching" if self.attach_seconds > 0 else "attached", AttachTime=now)
        return answer

    def _detach_volume(self, params: Params) -> Answer:
        now = self.clock.now()
        volume_id = params["VolumeId"]
        volume = self._volume_view(self._moto_volume(volume_id))
        if not volume["Attachments"]:
            raise AwsError(
                "IncorrectState", f"Volume '{volume_id}' is in the '{volume['State']}' state."
            )
        attached = volume["Attachments"][0]
        if params.get("InstanceId") not in (None, attached["InstanceId"]) or params.get(
            "Device"
        ) not in (None, attached["Device"]):
            raise AwsError(
                "InvalidAttachment.NotFound",
                f"Volume '{volume_id}' is not attached to instance '{params.get('InstanceId')}' "
                f"as '{params.get('Device')}'.",
            )
        ours = self._attachments.get(volume_id) or _Attachment(
            volume_id,
            attached["InstanceId"],
            attached["Device"],
            now,
            where=(self.region, self.account),
        )
        if ours.detaching:
            pass
        elif self.detach_seconds > 0:
            ours.detaching = True
            ours.since = now
            self._attachments[volume_id] = ours
        else:
            self._moto(
                "ec2",
                "DetachVolume",
                {"VolumeId": volume_id, "InstanceId": ours.instance_id, "Device": ours.device},
            )
            self._attachments.pop(volume_id, None)
        return {
            "VolumeId": volume_id,
            "InstanceId": ours.instance_id,
            "Device": ours.device,
            "State": "detaching",
            "AttachTime": attached.get("AttachTime", now),
        }

    def _delete_tags(self, params: Params) -> Answer:
        """DeleteTags without Tags deletes every user-defined tag of the resources (DeleteTags API
        reference, Tag.N: "If you omit this parameter, we delete all user-defined tags for the
        specified resources"); moto deletes none. With Tags it is moto's."""
        if params.get("Tags"):
            return self._moto("ec2", "DeleteTags", params)
        resources = list(params.get("Resources") or [])
        found = self._moto(
            "ec2", "DescribeTags", {"Filters": [{"Name": "resource-id", "Values": resources}]}
        )["Tags"]
        keys = sorted({t["Key"] for t in found if not t["Key"].startswith("aws:")})
        if keys:
            self._moto(
                "ec2",
                "DeleteTags",
                {"Resources": resources, "Tags": [{"Key": k} for k in keys]},
            )
        return {}

    def _delete_volume(self, params: Params) -> Answer:
        volume_id = params["VolumeId"]
        self._moto("ec2", "DeleteVolume", {"VolumeId": volume_id})
        self._volumes.pop(volume_id, None)
        self._attachments.pop(volume_id, None)
        return {}
