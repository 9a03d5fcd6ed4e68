"""Each run's cost as `raidsnap status` reads it after the run (raidsnap_cli.costs): the FSR a
restore enabled, the volumes a drill created and deleted, the restore a drill started, all
from the runs' own histories on the emulation. The prices themselves are checked against
hand computations in test/python/unit/plan/test_run_cost.py."""

from __future__ import annotations

from decimal import Decimal

import boto3

from raidsnap.plan import run_cost
from raidsnap_cli import costs
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    SLOW_EBS_INSTANCE_TYPE,
    backed_up,
    create_topics,
    launch_instance,
    make_array,
    name_in_config,
    terminate,
)


def test_a_restore_with_fsr_costs_its_dsu_hours_and_keeps_its_volumes(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 3, instance_type=SLOW_EBS_INSTANCE_TYPE)
    backed_up(emu.hosts, emu.run, fx)
    terminate(fx.instance_id)
    target = launch_instance(
        "db1-new", fx.availability_zone, tag_array=False, instance_type=SLOW_EBS_INSTANCE_TYPE
    )
    name_in_config(emu, "db1", target)
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "fsr"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"

    used = costs.usage(boto3.client("stepfunctions"), run.arn)

    assert used.transitions == run.transitions
    assert len(used.fsr) == 3
    assert all(run.output["fastRestored"])
    assert {p.zone for p in used.fsr} == {fx.availability_zone}
    cost = run_cost.price(used, run_cost.load_prices())
    line = next(x for x in cost.lines if x.item == "FSR DSU-hours")
    # Enabled for less than an hour: the one-hour minimum, 3 x $0.75
    assert line.usd == Decimal("2.25")
    # The run's own output carries the same figures, read by its last step from its history
    # (its Done state counted ahead): 3 pairs at the one-hour minimum, 3 x $0.75.
    own = {line["item"]: line for line in run.output["cost"]["lines"]}
    assert own["FSR DSU-hours"]["usd"] == "2.25"
    assert own["state transitions"]["quantity"] == str(run.transitions)
    assert Decimal(own["state transitions"]["usd"]) == run.transitions * Decimal("0.000025")
    assert run.output["cost"]["prices"]["checked"] == run_cost.load_prices().checked
    assert [v.volume_id for v in used.volumes] == run.output["volumeIds"]
    assert all(v.deleted is None for v in used.volumes)
    assert [m.item for m in cost.monthly] == ["volumes created, while kept"]


def test_a_drill_costs_its_restore_and_the_volumes_it_removed(emu: Emulation) -> None:
    create_topics(emu)
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    drill_host = launch_instance("db1-drill", fx.availability_zone, tag_array=False)
    boto3.client("ec2").create_tags(
        Resources=[drill_host], Tags=[{"Key": "raidsnap:array", "Value": "db1-drill"}]
    )
    run = emu.run("drill", {"array": "db1", "targetInstanceId": drill_host})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    restore = emu.wait(run.output["restoreExecutionArn"])

    used = costs.usage(boto3.client("stepfunctions"), run.arn)

    assert used.transitions == run.transitions + restore.transitions
    assert sorted(v.volume_id for v in used.volumes) == sorted(run.output["deletedVolumeIds"])
    assert all(v.deleted is not None and v.gib == 32 for v in used.volumes)
    cost = run_cost.price(used, run_cost.load_prices())
    assert "volumes while they lived" in [x.item for x in cost.lines]
    assert cost.monthly == []
    # The drill's own output: its run and its restore's, and the volumes until it deleted them
    own = {line["item"]: line for line in run.output["cost"]["lines"]}
    assert own["state transitions"]["quantity"] == str(run.transitions + restore.transitions)
    assert own["volumes while they lived"]["quantity"].startswith("3 volumes")
    assert run.output["cost"]["monthly"] == []
