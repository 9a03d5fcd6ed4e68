"""EC2's CopySnapshot as the EBS User Guide describes it ("Copy an Amazon EBS snapshot",
https://docs.aws.amazon.com/ebs/latest/userguide/ebs-copy-snapshot.html), on the virtual clock:

- the copy is made in the Region the request is sent to, from a completed snapshot of the
  Region it names (SourceRegion), one the caller owns or that is shared with its account
  (createVolumePermission: "Share an Amazon EBS snapshot"); a snapshot it cannot see is
  answered InvalidSnapshot.NotFound ("The specified snapshot does not exist", EC2 API error
  codes), as every EC2 call that names one; a shared snapshot's tags are its owner's and are not
  shown to the account it is shared with (DescribeSnapshots below leaves them out);
- it is pending, with progress, for ``copy_seconds``, then completed;
- "There is a limit of 20 concurrent snapshot copy requests per destination Region. If you exceed
  this quota, you receive a ResourceLimitExceeded error" (Considerations);
- a copy carries the tags of its TagSpecifications only (the source's tags are not copied);
- "Snapshots copies have an arbitrary source volume ID" (API reference, CopySnapshot): vol-ffffffff;
- encrypted copies are made asynchronously, and "if a snapshot copy operation fails (for example,
  if the proper KMS permissions are not obtained)" the copy ends in ``error`` and its StateMessage
  says why (API reference, Snapshot.StateMessage): a key the caller may not use through EC2 (the
  emulation's IAM answers ``key_usable``) fails the copy so. The message's wording is not
  documented; raidsnap only reports it.

moto 5.2.5 copies within one account only, and completes at once; the double keeps the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from moto.ec2.models import ec2_backends
from moto.ec2.models.elastic_block_store import Snapshot
from moto.ec2.utils import random_snapshot_id

from raidsnap_emulation.clock import VirtualClock
from raidsnap_emulation.double.base import DEFAULT_ACCOUNT, Answer, AwsError, Params
from raidsnap_emulation.double.ec2 import Ec2, _Snapshot

COPY_LIMIT = 20
COPY_LIMIT_ERROR = "ResourceLimitExceeded"
ARBITRARY_VOLUME = "vol-ffffffff"

KeyUsable = Callable[[str | None, str], bool]
"""(actor, key ARN): whether the caller may have EC2 use the key for it (IAM and key policy)."""


@dataclass
class _Copy:
    source_snapshot_id: str
    source_volume_id: str
    source_region: str
    region: str
    account: str


class Copies(Ec2):
    """CopySnapshot, and what the double needs to know of the copies it made."""

    def __init__(self, clock: VirtualClock, region: str = "us-east-1") -> None:
        super().__init__(clock, region)
        self.copy_seconds: float = 600.0
        self.key_usable: KeyUsable | None = None
        self._copies: dict[str, _Copy] = {}
        self._failing_copy_sources: dict[str, str] = {}
        self._handlers[("ec2", "CopySnapshot")] = self._copy_snapshot
        self._handlers[("ec2", "ModifySnapshotAttribute")] = self._modify_snapshot_attribute

    def _modify_snapshot_attribute(self, params: Params) -> Answer:
        """ "Encrypted snapshots ... cannot be made public. Snapshots encrypted with your default
        KMS key cannot be shared with other accounts" (EC2 API reference,
        ModifySnapshotAttribute): moto shares them anyway. The error code AWS answers with is
        not documented; the message is the reference's."""
        added = params.get("OperationType") == "add" or bool(
            (params.get("CreateVolumePermission") or {}).get("Add")
        )
        raw = self._snapshot_view(self._moto_snapshot(str(params["SnapshotId"]))) if added else {}
        if raw.get("Encrypted"):
            key = str(raw.get("KmsKeyId") or "")
            aliases = self._moto("kms", "ListAliases", {})["Aliases"]
            default = {
                str(a.get("TargetKeyId")) for a in aliases if a["AliasName"] == "alias/aws/ebs"
            }
            groups = params.get("GroupNames") or [
                p
                for p in (params.get("CreateVolumePermission") or {}).get("Add", [])
                if "Group" in p
            ]
            if groups or any(key.endswith(k) for k in default if k != "None"):
                raise AwsError(
                    "OperationNotPermitted",
                    "Encrypted snapshots cannot be made public. Snapshots encrypted with your "
                    "default KMS key cannot be shared with other accounts.",
                )
        return self._moto("ec2", "ModifySnapshotAttribute", params)

    def fail_copies(self, source: str, message: str = "") -> None:
        """Copies of this snapshot, or of any snapshot of this volume, those under way and those
        to come, end in error."""
        why = message or "Snapshot copy failed: internal error"
        with self._lock:
            self._failing_copy_sources[source] = why
            now = self.clock.now()
            for copy_id, copied in self._copies.items():
                snap = self._snapshots.get(copy_id)
                if (
                    source in (copied.source_snapshot_id, copied.source_volume_id)
                    and snap is not None
                    and self._snapshot_state(snap, now)[0] == "pending"
                ):
                    snap.fails, snap.failure = True, why

    def copies_under_way(self, region: str, account: str) -> int:
        now = self.clock.now()
        return sum(
            1
            for copy_id, copied in self._copies.items()
            if (copied.region, copied.account) == (region, account)
            and (snap := self._snapshots.get(copy_id)) is not None
            and self._snapshot_state(snap, now)[0] == "pending"
        )

    def shared_snapshot(self, snapshot_id: str, region: str) -> tuple[str, dict[str, Any]] | None:
        """Another account's snapshot in ``region`` that is shared with the caller's account
        (its createVolumePermission names the account, or all): (owner, the snapshot as the
        caller sees it). A shared snapshot's tags are its owner's and are not shown."""
        me = self.account
        for owner in dict.fromkeys([DEFAULT_ACCOUNT, *(a for a, _ in self.places)]):
            if owner == me:
                continue
            with self.calls_in(region, owner):
                try:
                    raw = self._moto_snapshot(snapshot_id)
                except (AwsError, IndexError):
                    continue
                permissions = self._moto(
                    "ec2",
                    "DescribeSnapshotAttribute",
                    {"SnapshotId": snapshot_id, "Attribute": "createVolumePermission"},
                )["CreateVolumePermissions"]
                if not any(p.get("UserId") == me or p.get("Group") == "all" for p in permissions):
                    return None
                view = self._snapshot_view(raw)
            view.pop("Tags", None)
            return owner, view
        return None

    def _describe_snapshots(self, params: Params) -> Answer:
        """DescribeSnapshots, with the snapshots of another account (OwnerIds) shared with the
        caller's among those it names by id (moto shows one account's only)."""
        answer = super()._describe_snapshots(params)
        others = {
            o for o in params.get("OwnerIds", []) if o not in ("self", "amazon", self.account)
        }
        filters = params.get("Filters", [])
        ids = list(params.get("SnapshotIds", [])) + [
            v for f in filters if f.get("Name") == "snapshot-id" for v in f.get("Values", [])
        ]
        # A filter on anything but the id or the state matches no shared snapshot's hidden tags.
        if not others or not ids or params.get("NextToken"):
            return answer
        if any(f.get("Name") not in ("snapshot-id", "status") for f in filters):
            return answer
        states = [v for f in filters if f.get("Name") == "status" for v in f.get("Values", [])]
        for snapshot_id in ids:
            shared = self.shared_snapshot(snapshot_id, self.region)
            if shared and shared[0] in others and (not states or shared[1]["State"] in states):
                answer["Snapshots"].append(shared[1])
        return answer

    def _source(self, params: Params) -> tuple[str, dict[str, Any]]:
        """The snapshot to copy, and its owner: the caller's own, or one shared with it."""
        source_id, source_region = params["SourceSnapshotId"], params["SourceRegion"]
        try:
            with self.calls_in(source_region, self.account):
                found = (self.account, self._snapshot_view(self._moto_snapshot(source_id)))
        except (AwsError, IndexError):
            shared = self.shared_snapshot(source_id, source_region)
            if shared is None:
                raise AwsError(
                    "InvalidSnapshot.NotFound", f"The snapshot '{source_id}' does not exist."
                ) from None
            found = shared
        owner, source = found
        if source.get("State") != "completed":
            raise AwsError(
                "IncorrectState",
                f"Snapshot '{source_id}' is in state '{source.get('State')}', not 'completed'.",
            )
        return owner, source

    def _copy_across(self, owner: str, params: Params, tags: list[dict[str, str]]) -> str:
        """A copy of another account's snapshot, made in the caller's account (moto 5.2.5 copies
        within one account only: the copy is made in its backend directly)."""
        source = ec2_backends[owner][params["SourceRegion"]].get_snapshot(
            params["SourceSnapshotId"]
        )
        here = ec2_backends[self.account][self.region]
        copy = Snapshot(
            here,
            random_snapshot_id(),
            volume=source.volume,
            description=params.get("Description", ""),
            encrypted=source.encrypted,
            kms_key_id=params.get("KmsKeyId"),
        )
        here.snapshots[copy.id] = copy
        copy.add_tags({t["Key"]: t["Value"] for t in tags})
        return str(copy.id)

    def _copy_snapshot(self, params: Params) -> Answer:
        now, here, account = self.clock.now(), self.region, self.account
        owner, source = self._source(params)
        if self.copies_under_way(here, account) >= COPY_LIMIT:
            raise AwsError(
                COPY_LIMIT_ERROR,
                f"You have reached the limit of {COPY_LIMIT} concurrent snapshot copies to "
                f"{here}. Retry after some of them complete.",
            )
        key = params.get("KmsKeyId")
        tags = [
            t
            for spec in params.get("TagSpecifications", [])
            if spec.get("ResourceType") == "snapshot"
            for t in spec.get("Tags", [])
        ]
        if owner == account:
            request = {k: v for k, v in params.items() if k not in ("Encrypted", "DryRun")}
            copy_id = str(self._moto("ec2", "CopySnapshot", request)["SnapshotId"])
        else:
            copy_id = self._copy_across(owner, params, tags)
        failure = self._failing_copy_sources.get(
            source["SnapshotId"], self._failing_copy_sources.get(str(source.get("VolumeId")))
        )
        if key and self.key_usable is not None and not self.key_usable(self.actor, str(key)):
            failure = f"The KMS key {key} is not accessible to create the snapshot copy."
        self._snapshots[copy_id] = _Snapshot(
            copy_id,
            ARBITRARY_VOLUME,
            now,
            fails=failure is not None,
            kms_key_id=str(key) if key else source.get("KmsKeyId"),
            seconds=self.copy_seconds,
            failure=failure or "",
            volume_shown=ARBITRARY_VOLUME,
        )
        self._copies[copy_id] = _Copy(
            str(source["SnapshotId"]),
            str(source.get("VolumeId", "")),
            params["SourceRegion"],
            here,
            account,
        )
        return {"SnapshotId": copy_id, "Tags": tags}
