"""Backup, after retention: hand the new set to the copy workflow of each Region (and account)
the array is copied to, and follow those runs to their end. The set here is complete whatever
they do; a copy that fails fails this run by name (CopyFailed) once every copy ended."""

from __future__ import annotations

from datetime import UTC, datetime

from botocore.exceptions import ClientError
from pydantic import Field, ValidationError

from raidsnap import copy_places, environment
from raidsnap.aws import THROTTLE_CODES, error_code, handover, manifests, snapshot_sets
from raidsnap.copy_places import CopyDestination
from raidsnap.copy_request import CopyInput, SourceMember, SourceRef, SourceSet
from raidsnap.errors import CopyFailedError, IncompleteSnapshotSetError
from raidsnap.models import Contract
from raidsnap.observability import count, for_array
from raidsnap.sets import SnapshotSet
from raidsnap.workflows.backup.contracts import CopiesCall, CopyReport, CopyRound

FIRST_LOOK_SECONDS = 60
LOOK_MAX_SECONDS = 600
RUNNING = "RUNNING"


def _account(execution_arn: str) -> str:
    parts = execution_arn.split(":")
    return parts[4] if len(parts) > 4 else ""


def request(s: SnapshotSet, destination: CopyDestination, execution_arn: str) -> CopyInput:
    """The copy request: the set as its manifest recorded it, and every member's tags (another
    account cannot read them)."""
    assert s.manifest is not None
    m = s.manifest
    return CopyInput(
        array=s.array,
        setId=s.set_id,
        source=SourceRef(
            region=environment.region(),
            account=_account(execution_arn),
            execution=m.execution_arn,
            stack=environment.stack_name(),
        ),
        set=SourceSet(
            memberCount=m.member_count,
            started=s.start_time.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            consistency="fsfreeze" if m.consistency == "fsfreeze" else "crash",
            md=dict(m.md),
            members=[
                SourceMember(
                    index=x.index or 0,
                    snapshotId=x.snapshot_id,
                    volumeId=x.volume_id,
                    tags={k: v for k, v in x.tags.items() if not k.startswith("aws:")},
                )
                for x in s.by_index()
            ],
        ),
        retention=destination.retention,
        kmsKeyId=destination.kms_key_arn or None,
    )


def hand_over(call: CopiesCall) -> CopyRound:
    """Start every destination's copy run (sharing the snapshots first with another account)."""
    plan, set_id = call.plan, call.retention.output.setId
    for_array(plan.array)
    s = snapshot_sets.get_set(plan.array, set_id)
    if s is None or not s.complete:
        raise IncompleteSnapshotSetError(
            f"set {set_id} of {plan.array} is not complete: not copied"
        )
    places = copy_places.copies_by_array().get(plan.array, [])
    runs = {d.id: _hand_over_one(s, d, plan.execution.arn) for d in places}
    # Taken back only now: one share serves every Region of the account (below).
    _unshare_unfollowed(s, places, runs, _account(plan.execution.arn))
    return CopyRound(status="pending", runs=runs, waitSeconds=FIRST_LOOK_SECONDS)


def _unshare_unfollowed(
    s: SnapshotSet | None,
    places: list[CopyDestination],
    runs: dict[str, CopyReport],
    here: str,
    accounts: set[str] | None = None,
) -> None:
    """Take the set's share back from each other account (of ``accounts``, default all) that no
    copy still under way needs. The share is per snapshot and account, not per Region
    (ModifySnapshotAttribute adds or removes an account id in createVolumePermission: EC2 API
    reference), and a copy in any Region of that account reads the source through it: taking it
    back when one Region's copy ends or cannot start would take it from another Region's copy
    of that account still under way."""
    if s is None:
        return
    account_of = {d.id: d.account for d in places}
    others = {d.account for d in places if d.account != here}
    needed = {account_of.get(k) for k, r in runs.items() if r.status == "copying"}
    for account in sorted(others - needed):
        if accounts is None or account in accounts:
            handover.share((x.snapshot_id for x in s.members), account, add=False)


def _hand_over_one(s: SnapshotSet, d: CopyDestination, execution_arn: str) -> CopyReport:
    """Share the set with another account, start the copy there, and record it; a copy that
    cannot be started there (no stack, a role refused) is recorded failed (hand_over takes the
    share back from an account none of whose copies started)."""
    here = _account(execution_arn)
    members = [x.snapshot_id for x in s.members]
    if d.account != here:
        try:
            handover.share(members, d.account, add=True)
        except ClientError as err:
            if error_code(err) in THROTTLE_CODES:
                raise
            return _not_shared(s, d, err)
    name = handover.run_name(s.set_id, f"{environment.region()}/{here}")
    body = request(s, d, execution_arn).model_dump_json(exclude_none=True)
    now = datetime.now(UTC).isoformat()
    try:
        arn = handover.start(d, name, body)
    except handover.NotStartedError as err:
        workflow = d.state_machine_arn.rsplit(":", 1)[-1]
        cause = (
            f"the copy could not be started in {d.region} of {d.account} ({err}): deploy "
            f"raidsnap there, a stack whose copy workflow is {workflow}"
            + (f", that accepts copies from this account ({d.role_arn})" if d.role_arn else "")
        )
        failed = {"status": "failed", "execution": "", "ended": now, "error": err.code}
        manifests.record_copy(s.array, s.set_id, d.id, failed)
        return CopyReport(status="failed", executionArn="", error=err.code, cause=cause)
    copying = {"status": "copying", "execution": arn, "since": now}
    manifests.record_copy(s.array, s.set_id, d.id, copying)
    return CopyReport(status="copying", executionArn=arn)


def _not_shared(s: SnapshotSet, d: CopyDestination, err: ClientError) -> CopyReport:
    """EC2 refused to share the set with the backup account: the copy is recorded failed, and
    the cause says why. "Snapshots encrypted with your default KMS key cannot be shared with
    other accounts" (EC2 API reference, ModifySnapshotAttribute)."""
    message = err.response.get("Error", {}).get("Message", "")
    keys = sorted({x.kms_key_id or "" for x in s.members if x.encrypted})
    cause = f"EC2 refused to share the set with {d.account} ({error_code(err)}: {message})"
    if keys:
        cause += (
            f". Its snapshots are encrypted with {', '.join(keys)}: a snapshot encrypted with the "
            "AWS managed key aws/ebs cannot be shared with another account. Encrypt the array's "
            "volumes with a customer managed key whose key policy lets that account use it "
            "(docs/copies.md); nothing was shared or copied"
        )
    failed = {"status": "failed", "execution": "", "ended": datetime.now(UTC).isoformat()}
    manifests.record_copy(s.array, s.set_id, d.id, failed | {"error": "ShareRefused"})
    return CopyReport(status="failed", executionArn="", error="ShareRefused", cause=cause)


def follow(call: CopiesCall) -> CopyRound:
    """Look at the runs still going; record each that ended. All ended: a failed one fails."""
    plan, set_id = call.plan, call.retention.output.setId
    assert call.copies is not None
    for_array(plan.array)
    destinations = {d.id: d for d in copy_places.copies_by_array().get(plan.array, [])}
    runs = dict(call.copies.runs)
    ended: set[str] = set()
    for key, run in runs.items():
        if run.status == "copying" and key in destinations:
            runs[key] = _ended(plan.array, set_id, destinations[key], run)
            if runs[key].status != "copying":
                ended.add(destinations[key].account)
    if ended:
        _unshare_unfollowed(
            snapshot_sets.get_set(plan.array, set_id),
            list(destinations.values()),
            runs,
            _account(plan.execution.arn),
            ended,
        )
    waited = call.copies.waitedSeconds + call.copies.waitSeconds
    if any(r.status == "copying" for r in runs.values()):
        wait = min(LOOK_MAX_SECONDS, max(FIRST_LOOK_SECONDS, waited // 4))
        return CopyRound(status="pending", runs=runs, waitSeconds=wait, waitedSeconds=waited)
    failed = {k: r for k, r in runs.items() if r.status == "failed"}
    count("SetCopiesFailed" if failed else "SetCopiesCompleted")
    if failed:
        raise CopyFailedError(
            f"set {set_id} of {plan.array} is complete here, but its copy failed: "
            + "; ".join(
                f"to {k}: {r.error}: {r.cause}" + (f" ({r.executionArn})" if r.executionArn else "")
                for k, r in failed.items()
            )
        )
    return CopyRound(status="done", runs=runs, waitedSeconds=waited, report=runs)


def _ended(array: str, set_id: str, d: CopyDestination, run: CopyReport) -> CopyReport:
    try:
        found = handover.look(d, run.executionArn)
    except handover.NotFollowedError as err:
        found = {"status": "FAILED", "error": "CopyNotFollowed", "cause": _not_followed(d, err)}
    status = str(found.get("status", RUNNING))
    if status == RUNNING:
        return run
    ended = datetime.now(UTC).isoformat()
    if status == "SUCCEEDED":
        ids = _copied_ids(str(found.get("output") or "{}"))
        report = CopyReport(status="copied", executionArn=run.executionArn, snapshotIds=ids)
    else:
        error = str(found.get("error") or status)
        cause = str(found.get("cause") or "")
        report = CopyReport(
            status="failed", executionArn=run.executionArn, error=error, cause=cause
        )
    record = {"status": report.status, "execution": run.executionArn, "ended": ended}
    if report.snapshotIds:
        # The copies there, by member index (`raidsnap sets` asks there for their locks).
        record["snapshots"] = ",".join(report.snapshotIds)
    manifests.record_copy(array, set_id, d.id, record)
    return report


def _not_followed(d: CopyDestination, err: handover.NotFollowedError) -> str:
    """Why the copy run there can no longer be looked at, and what to check."""
    where = f"{d.region} of {d.account}"
    check = (
        f"that the role {d.role_arn} still trusts this account and may "
        "states:DescribeExecution on the copy workflow's runs there (a redeployed or deleted "
        "stack there replaces or removes it; a service control policy may deny it)"
        if d.role_arn
        else "that the copy workflow there still exists and that the copy step here may "
        "states:DescribeExecution on its runs"
    )
    return (
        f"the copy run in {where} can no longer be looked at ({err}): it is no longer followed, "
        "and the set's share with that account is taken back once no other copy there needs "
        f"it. Check {check}; the copy there may still complete, and the stack there keeps or "
        "deletes what it made"
    )


class _CopyOutput(Contract):
    """What the backup reads of a copy run's output: the copies, by member index."""

    snapshotIds: list[str] = Field(default_factory=list)


def _copied_ids(output: str) -> list[str]:
    try:
        return _CopyOutput.model_validate_json(output).snapshotIds
    except ValidationError:
        return []


def copy_set(call: CopiesCall) -> CopyRound:
    return hand_over(call) if call.copies is None else follow(call)
