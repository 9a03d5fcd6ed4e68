"""Fast Snapshot Restore policy: whether a set fits the Region's quota, which pairs a run owns,
when its pairs are usable, and how long to wait before the next look."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# EC2 documents FSR optimisation at about 60 minutes per TiB of snapshot data.
OPTIMIZING_SECONDS_PER_GIB = 3600.0 / 1024.0
# Enabling usually takes about a minute.
ENABLING_SECONDS = 60.0
MIN_WAIT_SECONDS = 15
MAX_WAIT_SECONDS = 300

ACTIVE = ("enabling", "optimizing", "enabled")
# EC2 refuses a whole Enable/DisableFastSnapshotRestores call that names more than ten snapshots
# (InvalidRequest: "Number of values of parameter SourceSnapshotIds must be less than or equal to
# 10."), so every call names at most this many.
MAX_IDS_PER_CALL = 10
# "You can enable up to 5 snapshots for fast snapshot restore per Region" (EBS User Guide, fast
# snapshot restore, Considerations), adjustable: Service Quotas' EBS quota "Fast snapshot
# restore", code L-631ECBD3.
QUOTA_SERVICE_CODE = "ebs"
QUOTA_CODE = "L-631ECBD3"
DEFAULT_REGION_LIMIT = 5


@dataclass(frozen=True)
class PairState:
    snapshot_id: str
    state: str
    enabling_time: datetime | None = None
    # EC2's StateTransitionReason: Client.UserInitiated..., or why an enable failed.
    reason: str = ""
    # How long the pair has been in its state, by EC2's own clock: the answer's Date header
    # less the state's time (EnablingTime, OptimizingTime, EnabledTime). None: not known.
    in_state_seconds: float | None = None


@dataclass(frozen=True)
class RegionLimit:
    """How many snapshots may have FSR on at once in this Region, and, when Service Quotas did
    not say, why the default was assumed."""

    snapshots: int
    assumed_because: str | None = None


def pair_key(snapshot_id: str, zone: str) -> str:
    return f"{snapshot_id}@{zone}"


def in_zone(pairs: Iterable[str], zone: str) -> list[str]:
    """The snapshots of ``pairs`` (snapshot@zone) that are in ``zone``, sorted, once each."""
    return sorted({p.split("@")[0] for p in pairs if p.endswith(f"@{zone}")})


def by_zone(pairs: Iterable[str]) -> dict[str, list[str]]:
    """``pairs`` (snapshot@zone) grouped by zone, in the order given."""
    out: dict[str, list[str]] = defaultdict(list)
    for pair in pairs:
        snapshot_id, _, zone = pair.partition("@")
        out[zone].append(snapshot_id)
    return dict(out)


def active(state: str) -> bool:
    """Billed: FSR costs from enabling until it is disabled."""
    return state in ACTIVE


def usable(state: str, allow_optimizing: bool) -> bool:
    return state == "enabled" or (allow_optimizing and state == "optimizing")


def batches(snapshot_ids: list[str]) -> list[list[str]]:
    """The ids in calls EC2 accepts: MAX_IDS_PER_CALL at most each, in the order given."""
    return [
        snapshot_ids[i : i + MAX_IDS_PER_CALL]
        for i in range(0, len(snapshot_ids), MAX_IDS_PER_CALL)
    ]


def credit_seconds(size_gib: int) -> float:
    """How long after a pair is enabled its volume creation credit bucket (empty at first)
    holds one credit: it fills at MIN(10, 1024 / snapshot GiB) credits an hour (EBS User Guide,
    "Amazon EBS fast snapshot restore volume creation credits"). A volume created from a pair
    without a credit is not fast restored."""
    return 3600.0 / min(10.0, 1024.0 / max(1, size_gib))


def seconds_left(state: str | None, size_gib: int, spent_in_state: float) -> float:
    """What EC2's published pace says a pair still needs before it is enabled, given how long
    the workflow has already waited since it first saw the pair in this state. Time is counted
    in waited seconds, never read from a clock, so a retried step does not shorten it."""
    optimizing = size_gib * OPTIMIZING_SECONDS_PER_GIB
    if state in (None, "enabling"):
        return max(0.0, ENABLING_SECONDS - spent_in_state) + optimizing
    if state == "optimizing":
        return max(0.0, optimizing - spent_in_state)
    return 0.0


def quota_problem(
    wanted: Iterable[str], limit: RegionLimit, active_in_region: set[str]
) -> str | None:
    """Why the set cannot have FSR in this Region now, or None when it fits: the quota counts
    snapshots with FSR on in any AZ, and those of others (not this set's) leave the rest."""
    ids = set(wanted)
    others = active_in_region - ids
    room = max(0, limit.snapshots - len(others))
    if len(ids) <= room:
        return None
    return (
        f"FSR was not enabled: the set has {len(ids)} snapshots, and this Region allows FSR "
        f"on {limit.snapshots} snapshots at once ({QUOTA_SERVICE_CODE} quota "
        f"{QUOTA_CODE}), {len(others)} of them already taken by other snapshots, so "
        f"{room} are free"
    )


def owners(
    active_ids: Iterable[str],
    claims: Mapping[str, Iterable[str]],
    arn: str,
    zone: str,
    running: Callable[[str], bool],
) -> tuple[set[str], set[str]]:
    """Of the snapshots whose FSR is on in the zone already (``active_ids``): those someone
    else keeps on (an operator, another tool, a restore still running), which this run leaves
    alone; and those that restores which have ended left on, which this run takes as its own
    and disables with its own. Pairs this run claimed itself (a retried step) are simply its
    own. ``claims``: each run's claimed pairs by execution ARN; ``running``: is that run still
    running."""
    before: set[str] = set()
    adopted: set[str] = set()
    for sid in sorted(active_ids):
        pair = pair_key(sid, zone)
        holders = {holder for holder, pairs in claims.items() if pair in pairs}
        if arn in holders:
            continue
        if holders and not any(running(o) for o in sorted(holders)):
            adopted.add(sid)
        else:
            before.add(sid)
    return before, adopted


def observe(f: dict[str, Any], current: Mapping[str, str]) -> None:
    """Record, in waited seconds, when each pair was first seen in its current state."""
    seen = dict(f.get("seen") or {})
    for sid, st in current.items():
        if seen.get(sid, [None])[0] != st:
            seen[sid] = [st, f["waitedSeconds"]]
    f["seen"] = seen


def credit_wait(
    members: Sequence[Mapping[str, Any]],
    f: Mapping[str, Any],
    current: Mapping[str, str],
    pairs: Mapping[str, PairState] | None = None,
) -> float:
    """How much longer the enabled pairs need before each has a volume creation credit (a
    bucket starts empty when its pair is enabled); 0 when all have one. Each is timed by how
    long EC2 says it has been enabled (``pairs``); where EC2 does not say, a pair this run
    enabled by the waited seconds since it was first seen enabled. A pair enabled before the
    run may have spent its credits: check_volumes finds out from FastRestored."""
    ours = set(f.get("ours") or [])
    waited = int(f.get("waitedSeconds", 0))
    seen = f.get("seen") or {}
    left = 0.0
    for m in members:
        sid = m["snapshotId"]
        if current.get(sid) != "enabled":
            continue
        age = pairs[sid].in_state_seconds if pairs and sid in pairs else None
        if age is not None:
            # EC2's own account of how long it has been enabled: right for a pair this run
            # enabled, one it took over from an ended run, and one someone else keeps on.
            left = max(left, credit_seconds(int(m["sizeGib"])) - age)
        elif sid in ours:
            since = seen.get(sid, [None, waited])[1]
            left = max(left, credit_seconds(int(m["sizeGib"])) - (waited - since))
    return left


def next_wait(
    members: Sequence[Mapping[str, Any]],
    f: Mapping[str, Any],
    current: Mapping[str, str],
    allow_optimizing: bool,
    pairs: Mapping[str, PairState] | None = None,
) -> int:
    """How long to wait before the next look: the slowest pair's remaining time at EC2's pace,
    within MIN_WAIT_SECONDS..MAX_WAIT_SECONDS."""
    waited = int(f.get("waitedSeconds", 0))
    seen = f.get("seen") or {}
    ours = set(f.get("ours") or [])
    left = credit_wait(members, f, current, pairs)
    for m in members:
        st = current.get(m["snapshotId"])
        if st is not None and usable(st, allow_optimizing):
            continue
        since = seen.get(m["snapshotId"], [None, waited])[1]
        need = seconds_left(
            None if st in (None, "absent") else st, int(m["sizeGib"]), waited - since
        )
        if m["snapshotId"] in ours and not allow_optimizing:
            need += credit_seconds(int(m["sizeGib"]))
        if allow_optimizing and st in (None, "absent", "enabling"):
            need = max(0.0, ENABLING_SECONDS - (waited - since))
        # A pair slower than EC2's published pace: look again after a quarter of the wait so far.
        left = max(left, need if need > 0 else waited / 4)
    return int(min(MAX_WAIT_SECONDS, max(MIN_WAIT_SECONDS, left)))


@dataclass(frozen=True)
class Verdict:
    """What one look at the pairs decides: ready, fall back (with why), or wait so long."""

    status: str  # "ready", "fallback" or "wait"
    why: str = ""
    wait_seconds: int = 0


def current_states(ids: Iterable[str], pairs: Mapping[str, PairState]) -> dict[str, str]:
    """Each snapshot's FSR state in the zone; "absent" when EC2 shows no pair for it."""
    return {i: (pairs[i].state if i in pairs else "absent") for i in ids}


def judge(
    members: Sequence[Mapping[str, Any]],
    f: Mapping[str, Any],
    current: Mapping[str, str],
    pairs: Mapping[str, PairState],
    *,
    allow_optimizing: bool,
    limit_seconds: int,
) -> Verdict:
    """The verdict of one look (``f`` has already observed ``current``)."""
    waited = int(f["waitedSeconds"])
    if (
        all(usable(st, allow_optimizing) for st in current.values())
        and credit_wait(members, f, current, pairs) <= 0
    ):
        return Verdict("ready")
    # disabling or disabled after the enable: EC2 failed it (or someone turned it off). It never
    # comes back by itself, so waiting out the limit would only delay the restore.
    gone = [sid for sid, st in current.items() if st in ("disabling", "disabled")]
    if gone:
        detail = ", ".join(
            f"{sid} {current[sid]} ({pairs[sid].reason or 'no reason'})" for sid in gone
        )
        return Verdict("fallback", f"FSR stopped after it was enabled, after {waited} s: {detail}")
    if waited >= limit_seconds:
        summary = (
            ", ".join(
                f"{sid} {st}" for sid, st in current.items() if not usable(st, allow_optimizing)
            )
            or "enabled, but not every pair held a volume creation credit yet"
        )
        return Verdict("fallback", f"FSR was not usable after {limit_seconds} s ({summary})")
    wait = min(
        next_wait(members, f, current, allow_optimizing, pairs), max(1, limit_seconds - waited)
    )
    return Verdict("wait", wait_seconds=wait)
