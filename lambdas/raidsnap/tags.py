"""Tag keys of the design's contract. Other code names tags only through these constants."""

from __future__ import annotations

PREFIX = "raidsnap:"

ARRAY = "raidsnap:array"
SET_ID = "raidsnap:set-id"
MEMBER_INDEX = "raidsnap:member-index"
MEMBER_COUNT = "raidsnap:member-count"
SOURCE_VOLUME = "raidsnap:source-volume"
MD_UUID = "raidsnap:md-uuid"
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
REPLACED_BY = "raidsnap:replaced-by"
# Not in the design's list, but needed to make a retried CreateSnapshots step idempotent: the
# execution that took the set, so a retry finds the set instead of taking a second one.
BACKUP_EXECUTION = "raidsnap:backup-execution"


def as_dict(tags: list[dict[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in tags or []}


def as_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]
