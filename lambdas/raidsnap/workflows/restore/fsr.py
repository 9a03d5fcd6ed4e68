"""Restore: Fast Snapshot Restore for the set's snapshots in the target's AZ, with a fallback
to prewarm when the Region's quota, EC2 or the time limit says no."""

from __future__ import annotations

from raidsnap.aws import fsr, kept_fsr, lock
from raidsnap.environment import RestoreSettings
from raidsnap.plan import fsr as plan_fsr
from raidsnap.workflows.restore.contracts import Fsr, FsrCall, Member, Plan


def fsr_step(call: FsrCall, settings: RestoreSettings) -> Fsr:
    """First call (no FSR result yet): enable FSR for the pairs not already enabled. Later
    calls: look, and decide how long to wait, or give up and fall back to prewarm."""
    if call.fsr is None:
        return _fsr_start(call.plan, settings)
    return _fsr_look(call.plan, call.fsr, settings.lock_table)


def _fsr_members(plan: Plan) -> list[Member]:
    """The members to be created from FSR-enabled snapshots (all, or those an auto mix chose)."""
    return [m for i, m in enumerate(plan.members) if plan.initialization.member(i) == "fsr"]


def _members(plan: Plan) -> list[dict[str, object]]:
    """The FSR members as raidsnap.plan.fsr reads them."""
    return [{"snapshotId": m.snapshotId, "sizeGib": m.sizeGib} for m in _fsr_members(plan)]


def _progress(f: Fsr) -> dict[str, object]:
    """What raidsnap.plan.fsr reads of the FSR so far (and observe() updates), as it reads it."""
    seen = {sid: [st, at] for sid, (st, at) in f.seen.items()}
    return {"ours": f.ours, "waitedSeconds": f.waitedSeconds, "seen": seen}


def _fsr_start(plan: Plan, settings: RestoreSettings) -> Fsr:
    """Enable FSR for the pairs not already enabled, unless the quota leaves no room."""
    zone = plan.availabilityZone
    ids = [m.snapshotId for m in _fsr_members(plan)]
    arn = plan.executionArn
    notes: list[str] = []
    too_many = _fsr_quota_problem(ids, notes)
    if too_many is not None:
        # Nothing is enabled; pairs only an earlier try of this step enabled (it claimed them
        # first) are this run's and go off with the fallback.
        claims = [c for c in lock.fsr_claims(settings.lock_table) if c.execution_arn == arn]
        mine = plan_fsr.in_zone((p for c in claims for p in c.pairs), zone)
        f = Fsr(status="fallback", ours=mine, before=[], disabled=False, notes=notes)
        return _fsr_fallback(plan, f, too_many, settings.lock_table)
    before, adopted = _fsr_owners(settings.lock_table, plan.array, arn, ids, zone)
    ours = [i for i in ids if i not in before]
    lock.claim_fsr(settings.lock_table, plan.array, arn, [plan_fsr.pair_key(i, zone) for i in ours])
    enabled = fsr.enable(ours, zone)
    lock.record_fsr_enabled(
        settings.lock_table,
        arn,
        {plan_fsr.pair_key(sid, zone): when for sid, when in enabled.enabling_times.items()},
    )
    f = Fsr(
        status="pending",
        ours=ours,
        before=sorted(before),
        waitedSeconds=0,
        seen={},
        disabled=False,
        notes=notes,
    )
    if enabled.problems:
        # A refusal (another restore took the quota's last places since we looked): what
        # this run enabled goes off again, what EC2 refused was never on.
        f.ours = [i for i in ours if i not in enabled.refused]
        why = "EC2 refused to enable FSR: " + "; ".join(enabled.problems)
        return _fsr_fallback(plan, f, why, settings.lock_table)
    allow = plan.initialization.allowOptimizing
    limit = plan.initialization.fsrTimeoutSeconds
    f.waitSeconds = min(plan_fsr.next_wait(_members(plan), _progress(f), {}, allow), limit)
    if before:
        notes.append(
            f"FSR was already enabled in {zone} for {len(before)} snapshots; "
            "the restore leaves it enabled"
        )
    if adopted:
        notes.append(
            f"FSR that ended runs left enabled in {zone} for {len(adopted)} snapshots is now "
            "this restore's, and is disabled with its own"
        )
    f.notes = notes
    if not ours:
        # Every pair was on before this run (someone keeps FSR enabled for these snapshots:
        # the case where it is worth having): look now rather than after a first wait.
        return _fsr_look(plan, f.model_copy(update={"waitSeconds": 0}), settings.lock_table)
    return f


def _fsr_look(plan: Plan, previous: Fsr, table: str) -> Fsr:
    """One look at the pairs: ready, fall back, or how long to wait."""
    zone = plan.availabilityZone
    ids = [m.snapshotId for m in _fsr_members(plan)]
    f = previous.model_copy(
        update={"waitedSeconds": previous.waitedSeconds + int(previous.waitSeconds or 0)}
    )
    pairs = fsr.states(ids, zone)
    allow = plan.initialization.allowOptimizing
    current = plan_fsr.current_states(ids, pairs)
    progress = _progress(f)
    plan_fsr.observe(progress, current)
    seen = progress["seen"]  # observe() records each pair's first sighting in its state
    if isinstance(seen, dict):
        f.seen = {sid: (str(st), int(at)) for sid, (st, at) in seen.items()}
    limit = plan.initialization.fsrTimeoutSeconds
    verdict = plan_fsr.judge(
        _members(plan), progress, current, pairs, allow_optimizing=allow, limit_seconds=limit
    )
    if verdict.status == "ready":
        f.status = "ready"
        f.states = current
        return f
    if verdict.status == "fallback":
        return _fsr_fallback(plan, f, verdict.why, table)
    f.waitSeconds = verdict.wait_seconds
    return f


def _fsr_owners(
    table: str, array: str, arn: str, ids: list[str], zone: str
) -> tuple[set[str], set[str]]:
    """Snapshots whose FSR is on in the zone already, split into those someone else keeps on
    and those ended runs left on (raidsnap.plan.fsr.owners). Pairs the array's fastRestore
    policy keeps are someone else's whatever ended run also claimed them: never adopted."""
    kept = kept_fsr.kept_pairs(table, array)
    claims = {c.execution_arn: set(c.pairs) - kept for c in lock.fsr_claims(table)}
    return plan_fsr.owners(fsr.already_active(ids, zone), claims, arn, zone, lock.running)


def _fsr_quota_problem(ids: list[str], notes: list[str]) -> str | None:
    """Why the set cannot have FSR in this Region now, or None when it fits: the quota counts
    snapshots with FSR on in any AZ, and those of others (not this set's) leave the rest."""
    limit = fsr.region_limit()
    if limit.assumed_because is not None:
        notes.append(
            f"Service Quotas did not give the Region's FSR quota ({limit.assumed_because}); "
            f"the default of {limit.snapshots} snapshots was assumed"
        )
    return plan_fsr.quota_problem(ids, limit, fsr.active_in_region())


def _fsr_fallback(plan: Plan, f: Fsr, why: str, table: str) -> Fsr:
    """Give FSR up: this run's pairs go off again (but those the array's fastRestore policy
    took over since), and the volumes are prewarmed instead (the later steps read that from the
    status, Fsr.used)."""
    ours = list(f.ours)
    kept_fsr.disable_unkept(table, plan.array, ours, plan.availabilityZone)
    then = "FSR disabled again and the" if ours else "the"
    notes = [*f.notes, f"{why}; {then} members are prewarmed instead"]
    return f.model_copy(update={"disabled": True, "status": "fallback", "notes": notes})
