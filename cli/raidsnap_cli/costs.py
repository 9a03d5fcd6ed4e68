"""One run's cost, read after it ended: its history, the restore a drill or a recovery started
(billed too), and what the run made (raidsnap.plan.run_cost prices it).

Sizes: a backup's snapshots by DescribeSnapshots' FullSnapshotSizeInBytes (the data in the
snapshot; for a volume's first snapshot that is what it added, for a later one it is an upper
bound: EBS stores only the blocks changed since the previous snapshot), else VolumeSize;
restored volumes by DescribeVolumes, or, once deleted (a drill's), by the set's snapshots and
their tags, as the restore created them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from botocore.exceptions import BotoCoreError, ClientError

from raidsnap import clients
from raidsnap.aws import kept_fsr_cost
from raidsnap.plan import run_cost

from . import queries
from .follow import new_events
from .views import aws_message

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

GIB = Decimal(1024**3)


def _first_seen(events: list[dict[str, Any]], key_part: str) -> dict[str, datetime]:
    """When each id first appears in a list under a key naming ``key_part`` in a step's result."""
    seen: dict[str, datetime] = {}

    def walk(value: Any, when: datetime) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if key_part in k.lower() and isinstance(v, list):
                    for item in v:
                        if isinstance(item, str):
                            seen.setdefault(item, when)
                walk(v, when)
        elif isinstance(value, list):
            for v in value:
                walk(v, when)

    for when, out in kept_fsr_cost.outputs(events):
        walk(out, when)
    return seen


def _children(events: list[dict[str, Any]], own: str) -> list[str]:
    """The executions this run started: a StartExecution.sync result's ExecutionArn, and the
    execution a callback Task's function reports it started (lambda:invoke.waitForTaskToken:
    the invocation's Payload, in TaskSubmitted; a recovery's StartRestore)."""
    arns = []
    for _, out in kept_fsr_cost.outputs(events):
        if isinstance(out, dict) and isinstance(out.get("ExecutionArn"), str):
            arns.append(out["ExecutionArn"])
    for e in events:
        raw = (e.get("taskSubmittedEventDetails") or {}).get("output")
        try:
            payload = json.loads(raw).get("Payload") if isinstance(raw, str) else None
        except (ValueError, AttributeError):
            continue
        started = payload.get("executionArn") if isinstance(payload, dict) else None
        if isinstance(started, str) and started.startswith("arn:") and ":execution:" in started:
            arns.append(started)
    return [a for a in dict.fromkeys(arns) if a != own]


def _snapshots_added(ids: list[str]) -> list[run_cost.SnapshotAdded]:
    if not ids:
        return []
    added = []
    for s in clients.ec2().describe_snapshots(SnapshotIds=ids)["Snapshots"]:
        full = s.get("FullSnapshotSizeInBytes")
        if full:
            added.append(run_cost.SnapshotAdded(s["SnapshotId"], Decimal(full) / GIB, "full size"))
        else:
            size = Decimal(s.get("VolumeSize", 0))
            added.append(run_cost.SnapshotAdded(s["SnapshotId"], size, "volume size"))
    return added


def _set_shapes(set_id: str) -> list[tuple[int, str, int | None, int | None]]:
    """Size, type, IOPS, throughput of each member, from the set's snapshots and their tags."""
    found = clients.ec2().describe_snapshots(
        OwnerIds=["self"], Filters=[{"Name": "tag:raidsnap:set-id", "Values": [set_id]}]
    )["Snapshots"]
    shapes = []
    for s in sorted(found, key=lambda s: int(_tag(s, "raidsnap:member-index") or 0)):
        iops, tput = _tag(s, "raidsnap:iops"), _tag(s, "raidsnap:throughput")
        shapes.append(
            (
                int(s.get("VolumeSize", 0)),
                _tag(s, "raidsnap:volume-type") or "gp3",
                int(iops) if iops else None,
                int(tput) if tput else None,
            )
        )
    return shapes


def _tag(resource: Mapping[str, Any], key: str) -> str | None:
    return next((t["Value"] for t in resource.get("Tags", []) if t["Key"] == key), None)


def _volumes(
    output: Mapping[str, Any], created: dict[str, datetime], deleted: dict[str, datetime]
) -> list[run_cost.VolumeLife]:
    ids = [i for i in output.get("volumeIds") or [] if isinstance(i, str)]
    try:
        described = clients.ec2().describe_volumes(VolumeIds=ids)["Volumes"] if ids else []
        shapes: dict[str, tuple[int, str, int | None, int | None]] = {
            v["VolumeId"]: (v["Size"], str(v["VolumeType"]), v.get("Iops"), v.get("Throughput"))
            for v in described
        }
    except ClientError:
        by_index = _set_shapes(str(output.get("setId", "")))
        shapes = {i: by_index[n] for n, i in enumerate(ids) if n < len(by_index)}
    lives = []
    for vid in ids:
        if vid not in shapes or vid not in created:
            continue
        gib, kind, iops, tput = shapes[vid]
        lives.append(
            run_cost.VolumeLife(vid, gib, kind, iops, tput, created[vid], deleted.get(vid))
        )
    return lives


def usage(
    sfn: SFNClient,
    arn: str,
    deleted: dict[str, datetime] | None = None,
    now: datetime | None = None,
) -> run_cost.Usage:
    """The run's usage and that of the runs it started; ``deleted``: when its parent deleted
    volumes it created (a drill's teardown); ``now``: until when FSR still on is counted."""
    now = now or datetime.now(UTC)
    events = new_events(sfn, arn, 0)
    info = sfn.describe_execution(executionArn=arn)
    output = json.loads(info.get("output") or "null")
    output = output if isinstance(output, dict) else {}
    used = run_cost.usage_of(events, zone=output.get("availabilityZone"))
    used.snapshots = _snapshots_added([str(i) for i in output.get("snapshotIds") or []])
    created = {k: v for k, v in _first_seen(events, "ids").items() if k.startswith("vol-")}
    used.volumes = _volumes(output, created, deleted or {})
    kept, notes = kept_fsr_cost.kept_fsr(events, now)
    used.fsr += kept
    used.notes += notes
    gone = _first_seen(events, "deleted")
    for child in _children(events, arn):
        used = used + usage(sfn, child, gone, now)
    return used


def run_cost_of(
    sfn: SFNClient,
    arn: str,
    overrides: Mapping[str, float | int | str] | None = None,
    now: datetime | None = None,
) -> run_cost.RunCost:
    return run_cost.price(usage(sfn, arn, now=now), run_cost.load_prices(overrides))


def price_overrides(config: Path | None) -> dict[str, Any]:
    """The ``prices:`` section of a config file (YAML, of which JSON is a part), refused before
    anything is read when it names a price the table does not have."""
    if config is None:
        return {}
    try:
        import yaml  # type: ignore[import-untyped]  # noqa: PLC0415 (only --config reads it)

        raw = yaml.safe_load(config.read_text())
    except (OSError, ImportError, ValueError) as err:
        raise typer.BadParameter(str(err), param_hint="'--config'") from None
    prices = raw.get("prices") if isinstance(raw, dict) else None
    if prices is not None and not isinstance(prices, dict):
        raise typer.BadParameter("prices: must be a mapping", param_hint="'--config'")
    try:
        run_cost.load_prices(prices)
    except (ValueError, ArithmeticError) as err:
        raise typer.BadParameter(str(err), param_hint="'--config'") from None
    return dict(prices or {})


def cost_lines(
    sfn: SFNClient,
    info: queries.ExecutionInfo,
    prices: Mapping[str, Any],
    now: datetime | None = None,
) -> dict[str, Any] | None:
    """What an ended run cost at list prices (its JSON, with ``lines`` to print); None while it
    runs: its last transitions are still to come. The one way every view of a run computes it
    (``status RUN``, and the end of a followed run). A cost that cannot be read now (the
    history or what the run made, refused or throttled) is one line saying why and which
    command computes it later: what the run did is shown all the same."""
    if info.stop is None:
        return None
    try:
        cost = run_cost_of(sfn, info.arn, prices, now)
    except (ClientError, BotoCoreError, ValueError, OSError) as e:
        why = _why(e)
        later = f"raidsnap status {info.name} computes it later"
        return {"error": why, "lines": [f"not computed now; {later} ({why})"]}
    return {**cost.as_json(), "lines": cost.text_lines()}


def _why(error: Exception) -> str:
    if isinstance(error, ClientError | BotoCoreError):
        return aws_message(error)
    return f"{type(error).__name__}: {error}"
