"""Review: what BackupCost publishes (RunCostUsd) for an ended backup, against what the run cost.

BackupCost (raidsnap.workflows.backup.ended) says `raidsnap status <run>` "prices the same
history the same way", and the dashboard's "run cost by array" widget sums RunCostUsd per array.
A backup of an array with a fastRestore policy turns FSR on for its new set (KeepFsr) and leaves
it on: each snapshot-zone pair is billed at least one DSU-hour from the moment it is enabled
(Amazon EBS pricing, Fast Snapshot Restore: "billed in Data Services Unit-Hours (DSUs) for each
Availability Zone in which they are enabled ... billed per minute with a 1-hour minimum",
https://aws.amazon.com/ebs/pricing/; docs/costs/prices.json, fsrDsuHour). README ("What one run
cost") makes that FSR the backup's own cost, and `raidsnap status` counts it. BackupCost prices
with raidsnap.aws.costs.so_far, which reads FSR only from a restore's step results: the backup's
RunCostUsd leaves out the run's largest cost, so the dashboard and `raidsnap status` disagree.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import boto3
import pytest

from raidsnap_cli import costs
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import configure_fast_restore, make_array


def _emitted(out: str, name: str) -> list[dict[str, Any]]:
    docs = [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]
    return [d for d in docs if name in d]


def test_review_backup_cost_publishes_the_fsr_its_policy_kept_as_status_counts_it(
    emu: Emulation, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a backup of an array whose fastRestore policy keeps FSR on the new set
    fx = make_array(emu.hosts, "db1", 3, unrelated=0)
    emu.double.fsr_region_limit = 10
    configure_fast_restore(emu, "db1", [fx.availability_zone], sets=1)
    run = emu.run("backup", {"array": "db1"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["fastRestore"]["status"] == "kept", run.output["fastRestore"]
    capsys.readouterr()

    # WHEN its end reaches BackupCost (the BackupEnded rule)
    deliveries = [d for d in emu.services.execution_event(run.arn) if "BackupCost" in d.target]
    assert deliveries and deliveries[0].delivered
    assert deliveries[0].result.error_type is None
    (doc,) = _emitted(capsys.readouterr().out, "RunCostUsd")
    published = Decimal(str(doc["RunCostUsd"][0]))

    # THEN what it publishes counts the DSU-hours the run started, as raidsnap status does
    status = costs.run_cost_of(boto3.client("stepfunctions"), run.arn, now=emu.clock.now())
    fsr = sum((x.usd for x in status.lines if "FSR" in x.item), Decimal(0))
    assert fsr >= 3 * Decimal("0.75"), status.text()
    assert published >= fsr, (
        f"BackupCost publishes RunCostUsd {published} for db1; raidsnap status prices the same "
        f"run at {status.total}, {fsr} of it the FSR its policy turned on ({status.text()})"
    )
