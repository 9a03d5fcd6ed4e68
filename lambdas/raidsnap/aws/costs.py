"""A run's cost so far, read by its own last step from its history (GetExecutionHistory of
its own execution): raidsnap.plan.run_cost prices it with the table the stack gave the
function (RUN_PRICES). ``after``: the states still to come on the way to the end, each a
transition; the step's own invocation is counted up to now. A drill or a recovery adds the
usage its restore reported in its output, and a drill the volumes it deleted, until then.

Given its array, the step also publishes RUN_COST_METRIC (dimension Array): what this run cost
itself, without the runs it started, which publish their own, so that the dashboard's sum per
array counts each run once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from raidsnap.aws import executions, kept_fsr_cost
from raidsnap.environment import run_price_table
from raidsnap.observability import publish_alone
from raidsnap.plan import run_cost

RUN_COST_METRIC = "RunCostUsd"  # lib/constructs/monitoring.ts, RUN_COST_METRIC

Shape = tuple[int, str, int | None, int | None]  # GiB, type, IOPS, throughput


def so_far(
    execution_arn: str,
    *,
    zone: str | None = None,
    after: int = 1,
    volumes: Mapping[str, Shape] | None = None,
    children: Sequence[Mapping[str, Any]] = (),
    array: str | None = None,
    kept_fsr: bool = False,
) -> dict[str, Any]:
    """The cost as the run's output carries it: the priced lines, and the usage a parent adds
    to its own."""
    events = list(executions.history(execution_arn))
    # The step's own invocation runs until now: never before the history's last event (a
    # process's clock may lag the service's; the emulation's virtual clock runs ahead of it).
    latest = max((run_cost._when(e["timestamp"]) for e in events), default=None)
    now = datetime.now(UTC) if latest is None else max(datetime.now(UTC), latest)
    usage = run_cost.usage_of(events, zone, now=now)
    usage.transitions += after
    if kept_fsr:  # a backup's fastRestore policy: its pairs to now (raidsnap status's figure)
        pairs, notes = kept_fsr_cost.kept_fsr(events, now)
        usage.fsr += pairs
        usage.notes += notes
    created = run_cost.first_seen(events, "ids")
    usage.volumes = [
        run_cost.VolumeLife(vid, *shape, created[vid], None)
        for vid, shape in (volumes or {}).items()
        if vid in created
    ]
    deleted = run_cost.first_seen(events, "deleted")
    prices = run_cost.load_prices(table=run_price_table())
    theirs = Decimal(0)
    for child in children:
        theirs += run_cost.price(run_cost.Usage.from_json(child, {}), prices).total
        usage = usage + run_cost.Usage.from_json(child, deleted)
    cost = run_cost.price(usage, prices)
    if array:
        # USD has no CloudWatch unit: None (CloudWatch API reference, MetricDatum.Unit).
        publish_alone(
            RUN_COST_METRIC, float(cost.total - theirs), {"Array": array}, MetricUnit.NoUnit
        )
    return {**cost.as_json(), "usage": usage.as_json()}
