"""Instances: finding an array's instance, its member volumes, its SSM agent, and what the
instance says about the array."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from raidsnap import clients, tags
from raidsnap.aws import error_code
from raidsnap.errors import ArrayNotFoundError
from raidsnap.plan import md_choice

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import FilterTypeDef


@dataclass(frozen=True)
class Attachment:
    volume_id: str
    device: str


@dataclass(frozen=True)
class ArrayInstance:
    instance_id: str
    availability_zone: str
    root_device: str
    attachments: tuple[Attachment, ...]
    instance_type: str = ""
    # The instance's tags: which arrays it holds (raidsnap.tags.holds) and how to tell them apart.
    tag_map: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def boot_volume_id(self) -> str | None:
        for att in self.attachments:
            if att.device == self.root_device:
                return att.volume_id
        return None


@dataclass(frozen=True)
class Member:
    index: int
    volume_id: str
    device: str | None = None


@dataclass(frozen=True)
class Layout:
    """What is known of the array: members in slot order, and md facts where discovery ran."""

    members: tuple[Member, ...]
    source: str  # "discovery" or "tags"
    note: str = ""
    md: dict[str, Any] = field(default_factory=dict)
    # The array's raid devices (N); members may be fewer when it runs degraded.
    raid_devices: int | None = None
    # Slots with no working member, and whether md says the array is degraded at all (it may
    # not say which slot).
    missing_slots: tuple[int, ...] = ()
    degraded: bool = False
    # Devices of the array that hold no slot: hot spares, members md marked faulty.
    without_slot: tuple[str, ...] = ()

    @property
    def member_count(self) -> int:
        return self.raid_devices if self.raid_devices is not None else len(self.members)


def _instance_from(raw: Mapping[str, Any]) -> ArrayInstance:
    attachments = tuple(
        Attachment(volume_id=m["Ebs"]["VolumeId"], device=m["DeviceName"])
        for m in raw.get("BlockDeviceMappings", [])
        if "Ebs" in m
    )
    return ArrayInstance(
        instance_id=raw["InstanceId"],
        availability_zone=raw["Placement"]["AvailabilityZone"],
        root_device=raw.get("RootDeviceName", ""),
        attachments=attachments,
        instance_type=str(raw.get("InstanceType", "")),
        tag_map=tags.as_dict(raw.get("Tags")),
    )


def tagged_running(array: str) -> list[tuple[ArrayInstance, dict[str, str]]]:
    """Every running instance that holds ``array`` by its tags (``raidsnap:array=<array>``, or
    the mark and ``raidsnap:array:<array>``), with its tags. Which of them is the array's is
    raidsnap.aws.homes' to say: a tag alone never moves an array."""
    running: FilterTypeDef = {"Name": "instance-state-name", "Values": ["running"]}
    # DescribeInstances filters: tag:<key> matches key and value, tag-key the key whatever its
    # value (EC2 API Reference, DescribeInstances).
    queries: tuple[list[FilterTypeDef], ...] = (
        [{"Name": f"tag:{tags.ARRAY}", "Values": [array]}, running],
        [{"Name": "tag-key", "Values": [tags.array_key(array)]}, running],
    )
    found: dict[str, tuple[ArrayInstance, dict[str, str]]] = {}
    for filters in queries:
        pages = clients.ec2().get_paginator("describe_instances").paginate(Filters=filters)
        for page in pages:
            for r in page["Reservations"]:
                for raw in r["Instances"]:
                    instance = _instance_from(raw)
                    if tags.holds(instance.tag_map, array):
                        found[instance.instance_id] = (instance, dict(instance.tag_map))
    return [found[k] for k in sorted(found)]


def describe_instance(instance_id: str) -> ArrayInstance:
    reservations = clients.ec2().describe_instances(InstanceIds=[instance_id])["Reservations"]
    return _instance_from(reservations[0]["Instances"][0])


ENV_VAR_MIN_AGENT_VERSION = "3.3.2746.0"
"""The first SSM agent that passes document parameters to scripts as SSM_<Name> environment
variables (interpolationType ENV_VAR). raidsnap's scripts read nothing else, so an older agent
would run them without parameters ("Troubleshooting parameter handling issues", AWS Systems
Manager User Guide)."""


def _version_key(version: str) -> tuple[int, ...] | None:
    parts = version.strip().split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


@dataclass(frozen=True)
class Agent:
    """The SSM agent of an instance as DescribeInstanceInformation reports it."""

    instance_id: str
    online: bool
    version: str

    @property
    def too_old(self) -> bool:
        """Older than the first agent that honours ENV_VAR (versions compare numerically; one
        that cannot be read counts as too old: nothing says it passes parameters)."""
        key = _version_key(self.version)
        minimum = _version_key(ENV_VAR_MIN_AGENT_VERSION)
        return key is None or minimum is None or key < minimum

    def too_old_reason(self) -> str:
        return (
            f"the SSM agent of {self.instance_id} is version {self.version or 'unknown'}, older "
            f"than {ENV_VAR_MIN_AGENT_VERSION}, the first that passes document parameters to "
            "scripts as environment variables (interpolationType ENV_VAR); raidsnap's documents "
            "cannot run there. Update the agent (for example with the AWS-UpdateSSMAgent "
            "document)"
        )


def agent(instance_id: str) -> Agent:
    info = clients.ssm().describe_instance_information(
        Filters=[{"Key": "InstanceIds", "Values": [instance_id]}]
    )["InstanceInformationList"]
    mine = [i for i in info if i.get("InstanceId") == instance_id] or list(info)
    online = [i for i in mine if i.get("PingStatus") == "Online"]
    chosen = (online or mine or [{}])[0]
    return Agent(instance_id, bool(online), str(chosen.get("AgentVersion", "")))


def agent_online(instance_id: str) -> bool:
    return agent(instance_id).online


def volume_tags(volume_ids: list[str]) -> dict[str, dict[str, str]]:
    if not volume_ids:
        return {}
    out: dict[str, dict[str, str]] = {}
    pages = clients.ec2().get_paginator("describe_volumes").paginate(VolumeIds=volume_ids)
    for page in pages:
        for vol in page["Volumes"]:
            out[vol["VolumeId"]] = tags.as_dict(vol.get("Tags"))  # type: ignore[arg-type]
    return out


def _device_sort_key(device: str) -> tuple[int, str]:
    return (len(device), device)


def members_from_tags(array: str, instance: ArrayInstance, note: str) -> Layout:
    """The fallback when the instance cannot tell us: attached volumes tagged with the array.

    Slots come from a ``raidsnap:member-index`` (or, on a restored volume,
    ``raidsnap:restored-member-index``) volume tag when present, else device-name
    order; mdadm assembles by superblock, so the order only names the snapshots."""
    by_id = {a.volume_id: a for a in instance.attachments}
    volume_tag_map = volume_tags(list(by_id))
    tagged = [
        vid
        for vid, vt in volume_tag_map.items()
        if vt.get(tags.ARRAY) == array and vid != instance.boot_volume_id and not tags.is_copy(vt)
    ]
    if not tagged:
        raise ArrayNotFoundError(
            f"{note}; and no attached volume of {instance.instance_id} is tagged "
            f"{tags.ARRAY}={array}, so the members are unknown"
        )

    def key(vid: str) -> tuple[int, tuple[int, str]]:
        found = volume_tag_map[vid]
        raw = found.get(tags.MEMBER_INDEX) or found.get(tags.RESTORED_MEMBER_INDEX, "")
        return (int(raw) if raw.isdigit() else 1_000_000, _device_sort_key(by_id[vid].device))

    ordered = sorted(tagged, key=key)
    members = tuple(
        Member(index=i, volume_id=vid, device=by_id[vid].device) for i, vid in enumerate(ordered)
    )
    note = f"{note}; members taken from volume tags"
    # Volumes a restore assembled carry the md UUID it gave the array: the set records that, so
    # it stays restorable without anyone having to name the UUID.
    identities = {volume_tag_map[vid].get(tags.MD_UUID, "") for vid in ordered}
    md: dict[str, Any] = {}
    if len(identities) == 1 and (found := identities.pop()):
        md = {"uuid": found}
        note += f"; md UUID {found} from their {tags.MD_UUID} tag (the restore that made them)"
    return Layout(members=members, source="tags", note=note, md=md)


def members_from_discovery(
    array: str, instance: ArrayInstance, report: dict[str, Any]
) -> Layout | None:
    """Pick the array out of the discover document's report; None when it says nothing usable."""
    arrays = [a for a in report.get("arrays") or [] if a.get("members")]
    if not arrays:
        return None
    attached = {a.volume_id for a in instance.attachments}
    found = volume_tags(sorted(attached))
    tagged = {vid for vid, vt in found.items() if vt.get(tags.ARRAY) == array}
    # A read-only copy next to the array (a look at older data) is never the array.
    copies = {vid for vid, vt in found.items() if tags.is_copy(vt)}
    arrays = [md for md in arrays if not _volume_ids(md) or not _volume_ids(md) <= copies]
    if not arrays:
        return None
    tagged -= copies

    chosen = md_choice.choose(array, instance.instance_id, instance.tag_map, arrays, tagged)
    return _layout_of(chosen, instance, attached)


def _volume_ids(md: dict[str, Any]) -> set[str]:
    return {str(m["volumeId"]) for m in md["members"] if m.get("volumeId")}


def _layout_of(chosen: dict[str, Any], instance: ArrayInstance, attached: set[str]) -> Layout:
    """The chosen md array's members by slot, refused when they cannot be snapshotted."""
    # A member is a device in a slot (mdadm's RaidDevice number). Spares and members md marked
    # faulty hold none: they are not members, and their data is not the array's.
    all_devices = list(chosen["members"])
    raw_members = sorted(
        (m for m in all_devices if _slot(m.get("slot")) is not None),
        key=lambda m: int(m["slot"]),
    )
    without_slot = tuple(
        str(m.get("volumeId") or m.get("device"))
        for m in all_devices
        if _slot(m.get("slot")) is None
    )
    if not raw_members:
        raise ArrayNotFoundError(
            f"discovery reports no device of {chosen.get('device')} in a slot; the array is not "
            "running"
        )
    missing = [m.get("device") for m in raw_members if not m.get("volumeId")]
    if missing:
        raise ArrayNotFoundError(
            f"members {missing} of {chosen.get('device')} are not EBS volumes (no volume id "
            "in their NVMe serial); raidsnap snapshots EBS members only"
        )
    not_attached = [m["volumeId"] for m in raw_members if m["volumeId"] not in attached]
    if not_attached:
        raise ArrayNotFoundError(
            f"discovery reports members {not_attached} that EC2 does not show attached to "
            f"{instance.instance_id}"
        )
    members = tuple(
        Member(index=int(m["slot"]), volume_id=m["volumeId"], device=m.get("device"))
        for m in raw_members
    )
    reported = _slot(chosen.get("raidDevices"))
    raid_devices = reported if reported else len(members)
    slots = {m.index for m in members}
    missing_slots = tuple(s for s in range(raid_devices) if s not in slots)
    degraded = bool(missing_slots) or bool(_slot(chosen.get("degraded")))
    return Layout(
        members=members,
        source="discovery",
        md=_md_facts(chosen),
        raid_devices=raid_devices,
        missing_slots=missing_slots,
        degraded=degraded,
        without_slot=without_slot,
    )


def _md_facts(chosen: dict[str, Any]) -> dict[str, Any]:
    """What a set records of the md array and its filesystem (the facts discovery gave)."""
    fs = chosen.get("filesystem") or {}
    md = {
        "device": chosen.get("device"),
        "uuid": chosen.get("uuid"),
        "level": chosen.get("level"),
        "chunkKib": chosen.get("chunkKib"),
        "metadata": chosen.get("metadata"),
        "fsType": fs.get("type"),
        "mountPoint": chosen.get("mountPoint"),
    }
    return {k: v for k, v in md.items() if v}


def _slot(value: Any) -> int | None:
    """A slot or count as discovery printed it: a non-negative integer, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


# States of an instance that no longer holds anything (EC2 instance lifecycle; "unknown" is
# instance_facts' word for an instance EC2 does not know).
GONE_STATES = ("unknown", "shutting-down", "terminated")


def instance_facts(instance_id: str) -> tuple[str, dict[str, str]]:
    """(state, tags) of an instance; ("unknown", {}) when EC2 does not know it."""
    try:
        found = clients.ec2().describe_instances(InstanceIds=[instance_id])["Reservations"]
    except ClientError as err:
        if error_code(err).startswith("InvalidInstanceID"):
            return "unknown", {}
        raise
    raw = found[0]["Instances"][0] if found and found[0]["Instances"] else {}
    state = str(raw.get("State", {}).get("Name", "unknown"))
    return state, tags.as_dict(raw.get("Tags"))  # type: ignore[arg-type]


def untag_array(instance_id: str, array: str) -> None:
    """Remove only the array's tag, only with its value (a key-less DeleteTags removes every
    value of the key)."""
    clients.ec2().delete_tags(Resources=[instance_id], Tags=[{"Key": tags.ARRAY, "Value": array}])


def tag_array(instance_id: str, array: str) -> None:
    clients.ec2().create_tags(Resources=[instance_id], Tags=[{"Key": tags.ARRAY, "Value": array}])
