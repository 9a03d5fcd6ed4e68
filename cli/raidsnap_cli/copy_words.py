"""Where each set was copied, as `raidsnap sets` tells it: the place (a Region of this account,
or account/Region), how the copy went, and what snapshot locks hold the copies there. The
source's manifest records each copy run's outcome and its copies' ids
(raidsnap.workflows.backup.copies); the locks are asked of the Region the copies are in
(DescribeLockedSnapshots there). Another account's copies are that account's to read."""

from __future__ import annotations

from botocore.exceptions import ClientError

from raidsnap.aws import error_code, snapshot_locks
from raidsnap.sets import SnapshotSet

from .views import utc


def copy_lines(s: SnapshotSet) -> list[str]:
    """One line per place the set was handed to, in the order of the places' names."""
    places = s.manifest.copies if s.manifest is not None else {}
    return [_line(place, dict(record)) for place, record in sorted(places.items())]


def _line(place: str, record: dict[str, str]) -> str:
    status = record.get("status", "")
    words = {"copied": "copied", "copying": "copy under way", "failed": "copy failed"}
    line = f"{place}: {words.get(status, status)}"
    if status == "failed" and record.get("error"):
        line += f" ({record['error']})"
    ids = [i for i in record.get("snapshots", "").split(",") if i]
    if status != "copied" or not ids:
        return line
    if "/" in place:
        return f"{line} · its locks are the backup account's to read"
    return f"{line} · {_locks_there(place, ids)}"


def _locks_there(region: str, ids: list[str]) -> str:
    try:
        locks = snapshot_locks.holding(ids, region)
    except ClientError as exc:
        return f"locks there not shown ({error_code(exc)})"
    if not locks:
        return "not locked"
    states = ", ".join(sorted({lock.state for lock in locks.values()}))
    words = f"locked there ({states}, {len(locks)}/{len(ids)} snapshots)"
    ends = [lock.expires for lock in locks.values() if lock.expires is not None]
    return f"{words} until {utc(max(ends))}" if ends else words
