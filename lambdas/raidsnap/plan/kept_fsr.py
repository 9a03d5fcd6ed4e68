"""Keeping Fast Snapshot Restore enabled on an array's newest complete sets (its fastRestore
policy): what the policy's claim records, when a new set's FSR is ready, which sets the new one
replaces, and how long to wait before the next look.

The claim is one record per array, kept for as long as the policy keeps any FSR on: every set
whose FSR the policy enabled, in which zones, and whether it is still being enabled or kept.
Restores and the sweeper read it to leave those pairs alone (raidsnap.aws.kept_fsr)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from raidsnap.plan.fsr import (
    MAX_WAIT_SECONDS,
    MIN_WAIT_SECONDS,
    credit_seconds,
    pair_key,
    seconds_left,
)

ENABLING = "enabling"
KEPT = "kept"
# A pair seen off after the policy enabled it (someone disabled it, or EC2's enable failed) is
# enabled again this many times in one run before the run gives the new set up.
MAX_REENABLES = 2
# The backup workflow ends after 24 hours (TimeoutSeconds); the policy gives a new set up well
# before that, counted in waited seconds from its first look, less what the snapshots took.
WAIT_LIMIT_SECONDS = 20 * 3600
MIN_LIMIT_SECONDS = 3600
# What a pair looks like once it is off, or was never on.
OFF = ("disabling", "disabled", "absent")


@dataclass(frozen=True)
class KeptSet:
    """One set whose FSR the policy enabled: its snapshots (id -> GiB), the zones, the backup
    run that enabled it, and the pairs that were on before that run claimed them."""

    set_id: str
    taken_at: str
    zones: tuple[str, ...]
    sizes: Mapping[str, int]
    state: str = ENABLING
    run: str = ""
    before: tuple[str, ...] = ()
    # Of ``before``, the pairs no raidsnap restore claimed (an operator's, another tool's): the
    # policy never turns those off.
    foreign: tuple[str, ...] = ()

    @property
    def pairs(self) -> set[str]:
        return {pair_key(sid, zone) for sid in self.sizes for zone in self.zones}

    def to_json(self) -> dict[str, Any]:
        return {
            "setId": self.set_id,
            "takenAt": self.taken_at,
            "zones": list(self.zones),
            "sizes": dict(self.sizes),
            "state": self.state,
            "run": self.run,
            "before": list(self.before),
            "foreign": list(self.foreign),
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> KeptSet:
        return cls(
            set_id=str(raw["setId"]),
            taken_at=str(raw.get("takenAt", "")),
            zones=tuple(str(z) for z in raw.get("zones", [])),
            sizes={str(k): int(v) for k, v in dict(raw.get("sizes", {})).items()},
            state=str(raw.get("state", ENABLING)),
            run=str(raw.get("run", "")),
            before=tuple(str(p) for p in raw.get("before", [])),
            foreign=tuple(str(p) for p in raw.get("foreign", [])),
        )


@dataclass(frozen=True)
class Claim:
    """The policy's record for one array; version 0: there is none."""

    array: str
    version: int = 0
    sets: tuple[KeptSet, ...] = field(default_factory=tuple)

    @property
    def pairs(self) -> set[str]:
        return {p for s in self.sets for p in s.pairs}

    def find(self, set_id: str) -> KeptSet | None:
        return next((s for s in self.sets if s.set_id == set_id), None)


def with_set(sets: Sequence[KeptSet], new: KeptSet) -> list[KeptSet]:
    """The claim's sets with ``new`` added; a retried step finds its own entry and keeps it (the
    pairs it enabled the first time are on now, but were not on before it claimed them)."""
    mine = next((s for s in sets if s.set_id == new.set_id), None)
    if mine is not None and mine.run == new.run:
        return list(sets)
    return [s for s in sets if s.set_id != new.set_id] + [new]


def without(sets: Sequence[KeptSet], set_ids: Iterable[str]) -> list[KeptSet]:
    gone = set(set_ids)
    return [s for s in sets if s.set_id not in gone]


def marked_kept(sets: Sequence[KeptSet], set_id: str) -> list[KeptSet]:
    return [replace(s, state=KEPT) if s.set_id == set_id else s for s in sets]


def to_retire(sets: Sequence[KeptSet], keep: int) -> list[KeptSet]:
    """The sets whose FSR goes off: kept sets beyond the newest ``keep``, and sets still being
    enabled that are older than the oldest set kept (a later backup's set was ready first, so
    they would never be among the newest). A set being enabled that is newer stays: its run is
    still on it."""
    kept = sorted((s for s in sets if s.state == KEPT), key=lambda s: s.taken_at, reverse=True)
    if not kept:
        return []
    oldest_kept = kept[: max(1, keep)][-1].taken_at
    stale = [s for s in sets if s.state != KEPT and s.taken_at < oldest_kept]
    return kept[max(1, keep) :] + sorted(stale, key=lambda s: s.taken_at)


def wait_left(
    kept: KeptSet, current: Mapping[str, str], seen: Mapping[str, tuple[str, int]], waited: int
) -> float:
    """Seconds, at EC2's published pace, until every pair of the set is enabled and holds one
    volume creation credit; 0 once they all do. A pair's credit bucket starts empty when it is
    enabled and fills at MIN(10, 1024 / snapshot GiB) credits an hour (EBS User Guide, "Amazon
    EBS fast snapshot restore volume creation credits"): until it holds one, a restore's volume
    is not fast restored, and the set it replaces is still the better one to keep."""
    left = 0.0
    for sid, gib in kept.sizes.items():
        for zone in kept.zones:
            pair = pair_key(sid, zone)
            state = current.get(pair, "absent")
            spent = waited - seen.get(pair, (state, waited))[1]
            if state == "enabled":
                need = credit_seconds(gib) - spent
            else:
                pending = None if state in OFF else state
                need = seconds_left(pending, gib, spent) + credit_seconds(gib)
                # Slower than EC2's pace: not ready, look again after a quarter of the wait.
                need = max(need, waited / 4, float(MIN_WAIT_SECONDS))
            left = max(left, need)
    return max(0.0, left)


def next_wait(left: float, waited: int, limit: int) -> int:
    """The seconds to the next look: what the slowest pair still needs, within the loop's
    bounds and the time the run has left."""
    wait = min(MAX_WAIT_SECONDS, max(MIN_WAIT_SECONDS, left))
    return int(max(1, min(wait, limit - waited)))


def wait_limit(snapshot_seconds: int) -> int:
    """How long the run may wait for a new set's FSR, given what its snapshots took."""
    return max(MIN_LIMIT_SECONDS, WAIT_LIMIT_SECONDS - snapshot_seconds)


def observe(
    seen: Mapping[str, tuple[str, int]], current: Mapping[str, str], waited: int
) -> dict[str, tuple[str, int]]:
    """When each pair was first seen in its current state, in waited seconds."""
    out = dict(seen)
    for pair, state in current.items():
        if out.get(pair, ("", 0))[0] != state:
            out[pair] = (state, waited)
    return out
