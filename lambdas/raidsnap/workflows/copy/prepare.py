"""Copy, first step: check the request against what this account can see of the source set,
and record the copy's intent here (its manifest, status taking, before any copy is made)."""

from __future__ import annotations

from datetime import UTC, datetime

from raidsnap import environment, tags
from raidsnap.aws import copies, manifests
from raidsnap.copy_request import CopyInput
from raidsnap.errors import (
    CopyFailedError,
    IncompleteSnapshotSetError,
    InvalidInputError,
    SnapshotSetNotFoundError,
)
from raidsnap.models import parse_input
from raidsnap.observability import logger
from raidsnap.sets import Manifest
from raidsnap.workflows.copy.contracts import (
    CopyPlan,
    CopyPrepareCall,
    PlannedMember,
)

SOURCE_SNAPSHOT_KEY = "snapshot:"


def own_account(execution_arn: str) -> str:
    """The account this run is in: the fifth field of its execution ARN."""
    parts = execution_arn.split(":")
    return parts[4] if len(parts) > 4 else ""


def _check_members(request: CopyInput) -> None:
    slots = sorted(m.index for m in request.set.members)
    if slots != list(range(request.set.memberCount)):
        raise InvalidInputError(
            "set.members",
            f"must give one snapshot for each slot 0..{request.set.memberCount - 1}, not {slots}",
        )


def _check_source(request: CopyInput, account: str) -> dict[int, tuple[int, str]]:
    """Every source snapshot is there for this account (own, or shared with it) and completed;
    their sizes and start times by slot."""
    source = request.source
    wanted = {m.snapshotId: m.index for m in request.set.members}
    seen = copies.source_snapshots(source.region, source.account, wanted)
    missing = sorted(set(wanted) - set(seen))
    if missing:
        shared = (
            ""
            if source.account == account
            else (
                f" or is not shared with this account (the source account {source.account} shares "
                "each snapshot with ModifySnapshotAttribute, createVolumePermission)"
            )
        )
        raise SnapshotSetNotFoundError(
            f"set {request.setId} of {request.array}: {', '.join(missing)} in "
            f"{source.region} no longer exists{shared}; nothing was copied"
        )
    unfinished = sorted(sid for sid, raw in seen.items() if raw.get("State") != "completed")
    if unfinished:
        raise IncompleteSnapshotSetError(
            f"set {request.setId} of {request.array}: {', '.join(unfinished)} in "
            f"{source.region} is not completed; only a complete set is copied"
        )
    return {
        wanted[sid]: (int(raw.get("VolumeSize") or 0), _iso(raw.get("StartTime")))
        for sid, raw in seen.items()
    }


def _iso(when: object) -> str:
    if not isinstance(when, datetime):
        return ""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _intent(request: CopyInput, execution_arn: str) -> Manifest:
    started = datetime.fromisoformat(request.set.started.replace("Z", "+00:00"))
    source = {
        "region": request.source.region,
        "account": request.source.account,
        "execution": request.source.execution,
        "stack": request.source.stack,
    }
    source |= {f"{SOURCE_SNAPSHOT_KEY}{m.index}": m.snapshotId for m in request.set.members}
    return Manifest(
        array=request.array,
        set_id=request.setId,
        execution_arn=execution_arn,
        status="taking",
        member_count=request.set.memberCount,
        volumes={m.index: m.volumeId for m in request.set.members},
        started=started,
        consistency=request.set.consistency,
        md=dict(request.set.md),
        source={k: v for k, v in source.items() if v},
    )


def _check_recorded(request: CopyInput, recorded: Manifest | None) -> None:
    """A set of this id recorded here is this copy's (made by an earlier run from the same
    source), or the request is refused: a set taken here, or a copy from another source, is
    never touched by it."""
    if recorded is None:
        return
    if not recorded.source:
        raise CopyFailedError(
            f"set {request.setId} of {request.array} was taken here: it is not a copy"
        )
    origin = (request.source.account, request.source.region)
    if origin != (recorded.source.get("account"), recorded.source.get("region")):
        raise CopyFailedError(
            f"set {request.setId} of {request.array} here was copied from "
            f"{recorded.source.get('account')} in {recorded.source.get('region')}, not from "
            f"{origin[0]} in {origin[1]}; nothing was copied"
        )


def _md_uuid(request: CopyInput) -> str:
    found = request.set.md.get("uuid") or next(
        (m.tags.get(tags.MD_UUID, "") for m in request.set.members), ""
    )
    return str(found or "")


def _check_name(request: CopyInput) -> None:
    """An array name is a stack's own: a copy of an array whose name a set taken here already
    has, with another md UUID (or none known), is another array, and is refused before
    anything is recorded or copied. So is one whose name copies from another source (another
    account or Region) already have with another md UUID: two sources' arrays of one name would
    be restored one for the other."""
    wanted = _md_uuid(request)
    recorded = manifests.of_array(request.array)
    local = {str(m.md.get("uuid", "")) for m in recorded if not m.source}
    others = sorted(u or "unknown" for u in local if not wanted or u != wanted)
    if others:
        raise InvalidInputError(
            "array",
            f"{request.array} here is an array of this stack's own (md UUID "
            f"{', '.join(others)}), not the source's (md UUID {wanted or 'unknown'}): its sets "
            "and the copies would be mistaken for one another. Copy it to a stack without an "
            "array of that name (stackName), or rename one of the arrays; nothing was copied",
        )
    origin = (request.source.account, request.source.region)
    held_copies = {
        (m.source.get("account", ""), m.source.get("region", ""), str(m.md.get("uuid", "")))
        for m in recorded
        if m.source and (m.source.get("account"), m.source.get("region")) != origin
    }
    foreign = sorted((a, r, u or "unknown") for a, r, u in held_copies if not wanted or u != wanted)
    if foreign:
        held = "; ".join(f"from {a} in {r}, md UUID {u}" for a, r, u in foreign)
        raise InvalidInputError(
            "array",
            f"{request.array} here holds copies of another array of that name ({held}), not "
            f"of the one of {origin[0]} in {origin[1]} (md UUID {wanted or 'unknown'}): a "
            f"restore of {request.array} here would take one for the other. Copy it to a stack "
            "that holds no copies of that name (stackName), rename one of the arrays, or delete "
            "the other source's copies here first; nothing was copied",
        )


def prepare(call: CopyPrepareCall) -> CopyPlan:
    """Validate the request, check the source, and record the intent (or find the copy done)."""
    request = parse_input(CopyInput, call.input)
    _check_members(request)
    here, me = environment.region(), call.execution.id
    if (request.source.region, request.source.account) == (here, own_account(me)):
        raise InvalidInputError("source", f"the set is in {here} of this account already")
    logger.append_keys(array=request.array, set_id=request.setId)
    sizes = _check_source(request, own_account(me))
    _check_name(request)
    recorded = manifests.get(request.array, request.setId)
    done = recorded is not None and recorded.status == "taken"
    _check_recorded(request, recorded)
    if recorded is None or not done:
        try:
            manifests.begin(_intent(request, me))
        except RuntimeError as err:
            raise CopyFailedError(
                f"set {request.setId} of {request.array} is being copied here by another run "
                f"({err}); it ends by itself, or its failure removes its record"
            ) from None
    return CopyPlan(
        array=request.array,
        setId=request.setId,
        region=here,
        executionArn=me,
        startTime=call.execution.startTime or datetime.now(UTC).isoformat(),
        sourceRegion=request.source.region,
        sourceAccount=request.source.account,
        members=[
            PlannedMember(
                index=m.index,
                sourceSnapshotId=m.snapshotId,
                sizeGib=sizes[m.index][0],
                tags=dict(m.tags),
                sourceStartTime=sizes[m.index][1],
            )
            for m in sorted(request.set.members, key=lambda m: m.index)
        ],
        retention=request.retention,
        kmsKeyId=request.kmsKeyId,
        alreadyCopied=done,
    )
