"""Tag keys of the design's contract. Other code names tags only through these constants."""

from __future__ import annotations

from collections.abc import Mapping

PREFIX = "raidsnap:"

ARRAY = "raidsnap:array"
SET_ID = "raidsnap:set-id"
MEMBER_INDEX = "raidsnap:member-index"
MEMBER_COUNT = "raidsnap:member-count"
SOURCE_VOLUME = "raidsnap:source-volume"
MD_UUID = "raidsnap:md-uuid"
# The md device the array was assembled as when the set was taken (/dev/md0, /dev/md127...):
# replace mode and recovery release that device, not whatever /dev/md0 holds.
MD_DEVICE = "raidsnap:md-device"
MD_LEVEL = "raidsnap:md-level"
MD_CHUNK_KIB = "raidsnap:md-chunk-kib"
FS_TYPE = "raidsnap:fs-type"
MOUNT_POINT = "raidsnap:mount-point"
VOLUME_TYPE = "raidsnap:volume-type"
IOPS = "raidsnap:iops"
THROUGHPUT = "raidsnap:throughput"
CONSISTENCY = "raidsnap:consistency"
# A set taken while the array was degraded (a member missing or failed): never restored as latest.
DEGRADED = "raidsnap:degraded"
RESTORE_EXECUTION = "raidsnap:restore-execution"
# A restored volume names its set and slot under keys of its own, never SET_ID or MEMBER_INDEX:
# a tool that copies a volume's tags onto its own snapshots must not be able to join a set.
RESTORED_FROM = "raidsnap:restored-from"
RESTORED_MEMBER_INDEX = "raidsnap:restored-member-index"
# The run that created a volume: a nonce unique to one execution of the restore workflow
# (execution names, hence ARNs, are unique for 90 days only).
RESTORE_RUN = "raidsnap:restore-run"
REPLACED_BY = "raidsnap:replaced-by"
# Not in the design's list: a volume of a read-only copy (a look at older data, a drill), which
# may sit next to the live array on its instance. Backups, recovery evidence and replace mode
# never take it for one of the array's own members.
READ_ONLY_COPY = "raidsnap:read-only-copy"


# Not in the design's list: one instance may carry several arrays. ``raidsnap:array=<name>``
# stays the instance's mark (IAM conditions and the documents' grants look at that key); each
# further array on it is named by a key of its own, ``raidsnap:array:<name>``, whose value is
# the array's md UUID or its mount point, so discovery can pick it out of several md arrays.
# EC2 tag keys take up to 128 characters of letters, digits, spaces and + - = . _ : / @
# ("Tag restrictions", EC2 User Guide): a 63-character array name fits, and so does a value of
# an md UUID (hex and ':') or a mount point.
ARRAY_KEY_PREFIX = "raidsnap:array:"


def array_key(array: str) -> str:
    return f"{ARRAY_KEY_PREFIX}{array}"


def holds(instance_tags: Mapping[str, str], array: str) -> bool:
    """Whether an instance's tags say it holds ``array``: its ``raidsnap:array`` names it, or it
    carries that mark and ``raidsnap:array:<array>`` (a per-array tag alone counts for nothing:
    without the mark raidsnap may not act on the instance)."""
    if instance_tags.get(ARRAY) == array:
        return True
    return bool(instance_tags.get(ARRAY)) and array_key(array) in instance_tags


def held_name(instance_tags: Mapping[str, str], array: str) -> str:
    """``array`` when the instance holds it, else the name its ``raidsnap:array`` gives."""
    return array if holds(instance_tags, array) else instance_tags.get(ARRAY, "")


def array_selector(instance_tags: Mapping[str, str], array: str) -> str:
    """The md UUID or mount point a per-array tag gives for ``array`` ("" without one)."""
    if not holds(instance_tags, array):
        return ""
    return instance_tags.get(array_key(array), "").strip()


def is_copy(volume_tags: Mapping[str, str]) -> bool:
    return volume_tags.get(READ_ONLY_COPY) == "true"


# Not in the design's list, but needed to make a retried CreateSnapshots step idempotent: the
# execution that took the set, so a retry finds the set instead of taking a second one.
BACKUP_EXECUTION = "raidsnap:backup-execution"


# Not in the design's list: a copy of a set made in another Region or account carries the
# set's tags and these, which say what it is a copy of (the source snapshot, its Region and
# account) and which copy run made it (so a retried step finds the copies it already started).
SOURCE_REGION = "raidsnap:source-region"
SOURCE_ACCOUNT = "raidsnap:source-account"
SOURCE_SNAPSHOT = "raidsnap:source-snapshot"
COPY_EXECUTION = "raidsnap:copy-execution"
# When the source snapshot was started (its StartTime, ISO 8601 UTC): a copy's own StartTime is
# when its CopySnapshot was called, one call per member, so only this tells that the copies of
# one set hold data taken at one point in time (``raidsnap sets adopt`` checks it).
SOURCE_START_TIME = "raidsnap:source-start-time"


def as_dict(tags: list[dict[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in tags or []}


def as_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]
