"""Reading snapshots, and what a restored volume's snapshot recorded."""

from __future__ import annotations

from raidsnap import clients, tags


def md_uuid_of_volume(volume_id: str) -> str:
    """The md UUID recorded on the snapshot a restored volume was made from ("" if none)."""
    ec2 = clients.ec2()
    (volume,) = ec2.describe_volumes(VolumeIds=[volume_id])["Volumes"]
    snapshot_id = volume.get("SnapshotId")
    if not snapshot_id:
        return ""
    found = ec2.describe_snapshots(SnapshotIds=[snapshot_id])["Snapshots"]
    return tags.as_dict(found[0].get("Tags") if found else None).get(tags.MD_UUID, "")  # type: ignore[arg-type]
