"""Restore: Fast Snapshot Restore for the set's snapshots in the target's AZ, with a fallback
to prewarm when the Region's quota, EC2 or the time limit says no."""

from __future__ import annotations

from typing import Any

from raidsnap.aws import fsr, lock
from raidsnap.environment import RestoreSettings
from raidsnap.plan import fsr as plan_fsr

State = dict[str, Any]


def fsr_step(state: State, settings: RestoreSettings) -> State:
    """First call: enable FSR for the pairs not already enabled. Later calls: look, and decide
    how long to wait, or give up and fall back to prewarm."""
    if state["fsr"]["status"] == "start":
        return _fsr_start(state, settings)
    return _fsr_look(state)


def _fsr_start(state: State, settings: RestoreSettings) -> State:
    """Enable FSR for the pairs not already enabled, unless the quota leaves no room."""
    zone = state["availabilityZone"]
    ids = [m["snapshotId"] for m in state["members"]]
    arn = state["execution"]["id"]
    too_many = _fsr_quota_problem(state, ids)
    if too_many is not None:
        # Nothing is enabled; pairs only an earlier try of this step enabled (it claimed them
        # first) are this run's and go off with the fallback.
        claims = [c for c in lock.fsr_claims(settings.lock_table) if c.execution_arn == arn]
        mine = plan_fsr.in_zone((p for c in claims for p in c.pairs), zone)
        state["fsr"] = {"status": "fallback", "ours": mine, "before": [], "disabled": False}
        return _fsr_fallback(state, too_many)
    before, adopted = _fsr_owners(settings.lock_table, arn, ids, zone)
    ours = [i for i in ids if i not in before]
    lock.claim_fsr(
        settings.lock_table, state["array"], arn, [plan_fsr.pair_key(i, zone) for i in ours]
    )
    enabled = fsr.enable(ours, zone)
    lock.record_fsr_enabled(
        settings.lock_table,
        arn,
        {plan_fsr.pair_key(sid, zone): when for sid, when in enabled.enabling_times.items()},
    )
    f = {
        "status": "pending",
        "ours": ours,
        "before": sorted(before),
        "waitedSeconds": 0,
        "seen": {},
        "disabled": False,
    }
    state["fsr"] = f
    if enabled.problems:
        # A refusal (another restore took the quota's last places since we looked): what
        # this run enabled goes off again, what EC2 refused was never on.
        f["ours"] = [i for i in ours if i not in enabled.refused]
        return _fsr_fallback(state, "EC2 refused to enable FSR: " + "; ".join(enabled.problems))
    f["waitSeconds"] = plan_fsr.next_wait(
        state["members"], f, {}, bool(state["initialization"]["allowOptimizing"])
    )
    if before:
        state["notes"].append(
            f"FSR was already enabled in {zone} for {len(before)} snapshots; "
            "the restore leaves it enabled"
        )
    if adopted:
        state["notes"].append(
            f"FSR that ended runs left enabled in {zone} for {len(adopted)} snapshots is now "
            "this restore's, and is disabled with its own"
        )
    return state


def _fsr_look(state: State) -> State:
    """One look at the pairs: ready, fall back, or how long to wait."""
    f = dict(state["fsr"])
    zone = state["availabilityZone"]
    ids = [m["snapshotId"] for m in state["members"]]
    f["waitedSeconds"] = int(f["waitedSeconds"]) + int(f["waitSeconds"])
    pairs = fsr.states(ids, zone)
    allow = bool(state["initialization"]["allowOptimizing"])
    current = plan_fsr.current_states(ids, pairs)
    plan_fsr.observe(f, current)
    state["fsr"] = f
    limit = int(state["initialization"]["fsrTimeoutSeconds"])
    verdict = plan_fsr.judge(
        state["members"], f, current, pairs, allow_optimizing=allow, limit_seconds=limit
    )
    if verdict.status == "ready":
        f["status"] = "ready"
        f["states"] = current
        return state
    if verdict.status == "fallback":
        return _fsr_fallback(state, verdict.why)
    f["waitSeconds"] = verdict.wait_seconds
    return state


def _fsr_owners(table: str, arn: str, ids: list[str], zone: str) -> tuple[set[str], set[str]]:
    """Snapshots whose FSR is on in the zone already, split into those someone else keeps on
    and those ended runs left on (raidsnap.plan.fsr.owners)."""
    claims = {c.execution_arn: c.pairs for c in lock.fsr_claims(table)}
    return plan_fsr.owners(fsr.already_active(ids, zone), claims, arn, zone, lock.running)


def _fsr_quota_problem(state: State, ids: list[str]) -> str | None:
    """Why the set cannot have FSR in this Region now, or None when it fits: the quota counts
    snapshots with FSR on in any AZ, and those of others (not this set's) leave the rest."""
    limit = fsr.region_limit()
    if limit.assumed_because is not None:
        state["notes"].append(
            f"Service Quotas did not give the Region's FSR quota ({limit.assumed_because}); "
            f"the default of {limit.snapshots} snapshots was assumed"
        )
    return plan_fsr.quota_problem(ids, limit, fsr.active_in_region())


def _fsr_fallback(state: State, why: str) -> State:
    f = state["fsr"]
    ours = list(f.get("ours", []))
    fsr.disable(ours, state["availabilityZone"])
    f["disabled"] = True
    f["status"] = "fallback"
    state["initialization"]["used"] = "prewarm"
    then = "FSR disabled again and the" if ours else "the"
    state["notes"].append(f"{why}; {then} members are prewarmed instead")
    return state
