"""The FSR a backup's fastRestore policy turned on, priced from the run's history: the pairs its
KeepFsr results name, billed from EnablingTime to DisabledTime as DescribeFastSnapshotRestores
gives them. `raidsnap status` (cli/raidsnap_cli/costs.py) and the backup's own BackupCost
(raidsnap.workflows.backup.ended) both count a backup's kept FSR this way."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from raidsnap import clients
from raidsnap.plan import run_cost


def outputs(events: Iterable[Mapping[str, Any]]) -> Iterable[tuple[datetime, Any]]:
    """Each step's result in the history (a Lambda Task's or an integration's), with when."""
    for e in events:
        for key in ("lambdaFunctionSucceededEventDetails", "taskSucceededEventDetails"):
            raw = (e.get(key) or {}).get("output")
            if isinstance(raw, str):
                try:
                    yield run_cost._when(e["timestamp"]), json.loads(raw)
                except ValueError:
                    continue


def _pairs(events: list[dict[str, Any]]) -> dict[tuple[str, str], datetime]:
    """The snapshot-zone pairs a backup's fastRestore policy enabled for its new set (KeepFsr's
    results: the set's snapshots in the policy's zones, but the pairs it found on before), and
    when a result first named each."""
    pairs: dict[tuple[str, str], datetime] = {}
    for when, out in outputs(events):
        if not isinstance(out, dict) or not isinstance(out.get("zones"), list):
            continue
        snaps = out.get("snapshots")
        if not isinstance(snaps, list) or not all(isinstance(x, dict) for x in snaps):
            continue
        before = set(out.get("before") or [])
        for snap in snaps:
            for zone in out["zones"]:
                sid = str(snap.get("snapshotId", ""))
                if sid.startswith("snap-") and f"{sid}@{zone}" not in before:
                    pairs.setdefault((sid, str(zone)), when)
    return pairs


def kept_fsr(
    events: list[dict[str, Any]], now: datetime
) -> tuple[list[run_cost.FsrPair], list[str]]:
    """FSR a backup's fastRestore policy turned on: billed from EnablingTime to DisabledTime
    (DescribeFastSnapshotRestores), per minute with a one-hour minimum (Amazon EBS User Guide,
    "Configure fast snapshot restore": "billed for each minute ... a minimum of one hour"). A
    pair still on is counted to now: a running figure, attributed to this run, until the policy
    turns it off (when a newer set is ready). A pair EC2 no longer lists (its snapshot deleted,
    which disables it) counts from when the run first named it to the run's end: its one-hour
    minimum at least."""
    pairs = _pairs(events)
    if not pairs:
        return [], []
    found = {
        (str(f["SnapshotId"]), str(f["AvailabilityZone"])): f
        for f in clients.ec2().describe_fast_snapshot_restores(
            Filters=[{"Name": "snapshot-id", "Values": sorted({s for s, _ in pairs})}]
        )["FastSnapshotRestores"]
    }
    end = run_cost._when(events[-1]["timestamp"]) if events else now
    out, running = [], 0
    for (sid, zone), named in sorted(pairs.items()):
        f = found.get((sid, zone), {})
        start = f.get("EnablingTime") or named
        stop = f.get("DisabledTime") or f.get("DisablingTime")
        if stop is None and f:
            stop, running = now, running + 1
        out.append(run_cost.FsrPair(sid, zone, start, stop or end))
    notes = []
    if running:
        notes.append(
            f"FSR the fastRestore policy keeps on {running} snapshot-zone pairs of this set is "
            "counted to now: a running figure until the policy turns it off, when a newer set "
            "is ready"
        )
    return out, notes
