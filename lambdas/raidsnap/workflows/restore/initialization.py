"""Restore: how the new volumes are initialized, decided before anything changes.

``auto`` (the default) weighs every way, and the per-member mixes, with the restore-time model
(raidsnap.plan.restore_time) for this set, this target's EBS bandwidth and the FSR state of the
set's snapshots in the target's AZ now, and takes the quickest to full performance. An explicit
``fsr`` that the model says cannot be usable within its limit falls back to prewarm at once,
with the estimate, instead of waiting out the limit; its limit otherwise derives from the
model. ``rate``, ``prewarm`` and ``none`` are taken as asked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from raidsnap.aws import THROTTLE_CODES, bandwidth, error_code, fsr
from raidsnap.aws.instances import ArrayInstance
from raidsnap.environment import RestoreSettings, initialization_for
from raidsnap.errors import InvalidInputError
from raidsnap.models import RestoreInput
from raidsnap.plan import fsr as plan_fsr
from raidsnap.plan import restore_time as model
from raidsnap.workflows.restore.contracts import Initialization

LATENCIES = model.Latencies()
# The longest a restore waits for FSR, whatever the model says (EC2 may be slower than its
# published pace): a day.
MAX_FSR_WAIT_SECONDS = 86400


def decide(
    request: RestoreInput,
    settings: RestoreSettings,
    target: ArrayInstance,
    members: Sequence[Mapping[str, Any]],
    notes: list[str],
) -> Initialization:
    """The initialization of every member, and the notes that say why."""
    requested = request.initialization or initialization_for(
        request.array, settings.default_initialization
    )
    _refuse_unused_options(request, requested)
    rate = request.initializationRate or settings.default_initialization_rate
    if requested in ("rate", "none"):
        # Nothing is read on the instance: neither the FSR state nor its bandwidth matters.
        return Initialization(
            requested=requested,
            used=requested,
            rate=rate if requested == "rate" else None,
            fsrTimeoutSeconds=0,
            members=[requested] * len(members),
            withFsr=False,
        )
    bw, unknown = bandwidth.ebs_bandwidth(target.instance_type)
    if requested == "prewarm":
        init = Initialization(
            requested=requested,
            used=requested,
            fsrTimeoutSeconds=0,
            members=[requested] * len(members),
            withFsr=False,
        )
    else:
        shapes = _shapes(members, target.availability_zone, notes)
        if unknown:
            notes.append(f"{unknown}; a prewarm is weighed at the members' own throughput")
        init = (
            _auto(shapes, bw, rate, request.fsrTimeoutSeconds, notes)
            if requested == "auto"
            else _fsr(request, shapes, bw, notes)
        )
    if bw is None:
        return init
    # What the prewarm's predicted end is told with (workflows/restore/commands.py).
    return init.model_copy(
        update={"ebsBaselineMibs": bw.baseline_mibs, "ebsMaximumMibs": bw.maximum_mibs}
    )


def _refuse_unused_options(request: RestoreInput, used: str) -> None:
    """An option the initialization in force (the input's, else the configured one) would not
    use is refused, changing nothing, rather than ignored."""
    where = "" if request.initialization else f' (the configured initialization is "{used}")'
    if request.initializationRate is not None and used not in ("rate", "auto"):
        raise InvalidInputError(
            "initializationRate", f'is only used with "rate" or "auto"{where}. Nothing was changed'
        )
    if request.fsrTimeoutSeconds is not None and used not in ("fsr", "auto"):
        raise InvalidInputError(
            "fsrTimeoutSeconds", f'is only used with "fsr" or "auto"{where}. Nothing was changed'
        )
    if request.allowOptimizing and used != "fsr":
        raise InvalidInputError(
            "allowOptimizing", f'is only used with "fsr"{where}. Nothing was changed'
        )


def _shapes(
    members: Sequence[Mapping[str, Any]], zone: str, notes: list[str]
) -> list[model.MemberShape]:
    """Each member as the model reads it: size, throughput, and its snapshot's FSR in the AZ."""
    try:
        pairs = fsr.states([str(m["snapshotId"]) for m in members], zone)
    except ClientError as err:
        if error_code(err) in THROTTLE_CODES:
            raise  # the step is retried: a throttle must not change the choice
        # An SCP or a boundary that denies DescribeFastSnapshotRestores: weigh the set as
        # having no FSR, and say so.
        notes.append(
            f"the FSR state of the set could not be read ({error_code(err)}); it was weighed "
            "as having none"
        )
        pairs = {}
    out = []
    for m in members:
        pair = pairs.get(str(m["snapshotId"]))
        now = (
            model.FsrNow(pair.state, pair.in_state_seconds or 0.0)
            if pair is not None
            else model.FsrNow()
        )
        throughput = model.member_throughput(
            str(m["volumeType"]), m.get("throughput"), int(m["sizeGib"]), m.get("iops")
        )
        out.append(model.MemberShape(int(m["sizeGib"]), throughput, now))
    return out


def _auto(
    shapes: list[model.MemberShape],
    bw: model.Bandwidth | None,
    rate: int,
    asked_limit: int | None,
    notes: list[str],
) -> Initialization:
    best, others = model.choose(shapes, bw, LATENCIES, rate=rate, fsr_limit=asked_limit)
    if model.enables_fsr(shapes, best):
        # Only now ask the Region's quota: a way that enables FSR rarely wins.
        limit = fsr.region_limit()
        room = max(0, limit.snapshots - len(fsr.active_in_region()))
        best, others = model.choose(
            shapes, bw, LATENCIES, rate=rate, fsr_room=room, fsr_limit=asked_limit
        )
    notes.extend(model.explain(best, others, bw))
    return _initialization("auto", best, rate, _limit(best, others, asked_limit))


def _fsr(
    request: RestoreInput,
    shapes: list[model.MemberShape],
    bw: model.Bandwidth | None,
    notes: list[str],
) -> Initialization:
    """An explicit fsr: taken, unless it cannot be usable within its limit."""
    n = len(shapes)
    asked = model.estimate(shapes, ["fsr"] * n, bw, LATENCIES)
    prewarm = model.estimate(shapes, ["prewarm"] * n, bw, LATENCIES)
    limit = _limit(asked, [prewarm], request.fsrTimeoutSeconds)
    if request.allowOptimizing or asked.fsr_wait_s <= limit:
        chosen = _initialization("fsr", asked, None, limit)
        return chosen.model_copy(update={"allowOptimizing": request.allowOptimizing})
    slowest = max(shapes, key=model.fsr_ready_seconds)
    notes.append(
        f"FSR was asked for, but the set's snapshots would be usable only in about "
        f"{model.duration(asked.fsr_wait_s)} (optimizing takes 60 min per TiB, then a "
        f"{slowest.size_gib} GiB snapshot's first volume creation credit another "
        f"{model.duration(plan_fsr.credit_seconds(slowest.size_gib))}), and the restore waits "
        f"for FSR at most {model.duration(limit)} (fsrTimeoutSeconds, and never longer than a "
        "prewarm takes); FSR was not enabled and the members are prewarmed instead: full "
        f"performance in about {model.duration(prewarm.full_s)}"
    )
    return _initialization("fsr", prewarm, None, limit)


def _limit(chosen: model.Estimate, others: Sequence[model.Estimate], asked: int | None) -> int:
    """How long the run waits for FSR: a quarter more than the model's wait and a minute, but
    never longer than the quickest way without FSR takes to full performance (waiting past
    that only loses), nor than the input's fsrTimeoutSeconds."""
    without = [e.full_s for e in others if "fsr" not in e.members and e.full_s is not None]
    bound = min([*without, MAX_FSR_WAIT_SECONDS]) - LATENCIES.mounted_s
    limit = min(bound, max(60.0, chosen.fsr_wait_s * 1.25 + 60))
    if asked is not None:
        limit = min(limit, asked)
    return int(max(1, limit))


def _initialization(
    requested: str, e: model.Estimate, rate: int | None, limit: int
) -> Initialization:
    members = list(e.members)
    kinds = set(members)
    return Initialization(
        requested=requested,
        used=members[0] if len(kinds) == 1 else "mixed",
        rate=(rate or e.rate) if "rate" in kinds else None,
        fsrTimeoutSeconds=limit,
        members=members,
        withFsr="fsr" in kinds,
        mountedSeconds=round(e.mounted_s),
        fullPerformanceSeconds=None if e.full_s is None else round(e.full_s),
    )
