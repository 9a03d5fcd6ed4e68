"""The stack as AWS would authorize it on its first day: a backup, an alarm's notification and
the cancelling of a hung command each go through IAM (the synthesized roles, topic policy and
key policy) on the emulation, and each must be allowed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.events import CLOUDWATCH
from raidsnap_emulation.harness import EXAMPLE_CONFIG, Emulation, synthesize
from raidsnap_emulation.world import make_array


@pytest.fixture(scope="module")
def example_template() -> Path:
    return synthesize(config=EXAMPLE_CONFIG)


@pytest.fixture
def configured(example_template: Path) -> Iterator[Emulation]:
    with Emulation(example_template) as emulation:
        yield emulation


def test_a_backup_is_allowed_to_snapshot_the_members(emu: Emulation) -> None:
    # GIVEN an array whose members carry no raidsnap tag (the instance does)
    fx = make_array(emu.hosts, "db1", 3)
    # WHEN a backup runs
    run = emu.run("backup", {"array": "db1"})
    # THEN IAM let CreateSnapshots through for the instance, each member and each snapshot
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert emu.iam.denied() == []
    authorized = {
        d.request.resource.rsplit("/", 1)[1]
        for d in emu.iam.decisions
        if d.request.action == "ec2:CreateSnapshots" and d.allowed
    }
    assert {fx.instance_id, *fx.member_ids, "*"} <= authorized


def test_a_backup_whose_discovery_hangs_cancels_the_command(emu: Emulation) -> None:
    # GIVEN members found by their tags, and an agent that stops reporting mid-discovery
    fx = make_array(emu.hosts, "db1", 3, tag_members=True)
    emu.hosts.fail_next("discover", CommandOutcome(duration_seconds=100_000, unresponsive=True))
    # WHEN a backup runs past the discovery budget
    run = emu.run("backup", {"array": "db1"})
    # THEN the hung command is cancelled (IAM allows CancelCommand) and the set is taken
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output["discovery"] == "tags"
    cancels = [c for c in emu.double.calls if c.operation == "CancelCommand"]
    assert cancels and all(c.error_code is None for c in cancels)
    ssm = boto3.client("ssm")
    command_id = cancels[0].params["CommandId"]
    invocation = ssm.get_command_invocation(CommandId=command_id, InstanceId=fx.instance_id)
    assert invocation["Status"] == "Cancelled"
    assert emu.iam.denied() == []


@pytest.mark.parametrize("prefix", ["MonitoringRpodb1", "RecoveryAttachedEbsdb1"])
def test_an_alarm_notifies_the_topic(configured: Emulation, prefix: str) -> None:
    # GIVEN the stack synthesized with the example config (RPO and attached-EBS alarms)
    alarm = next(
        a for a in configured.template.of_type("AWS::CloudWatch::Alarm") if a.startswith(prefix)
    )
    topic = next(iter(configured.template.of_type("AWS::SNS::Topic")))
    topic_arn = configured.template.physical_id(topic)
    # WHEN the alarm goes to ALARM and back to OK
    fired = configured.services.alarm(alarm, "ALARM")
    cleared = configured.services.alarm(alarm, "OK")
    # THEN CloudWatch may publish both to the topic (topic policy) with the topic's key (key
    # policy), and the operators get both notifications
    for deliveries in (fired, cleared):
        published = [d for d in deliveries if d.target == topic_arn]
        assert len(published) == 1
        assert published[0].principal == CLOUDWATCH
        assert published[0].delivered, published[0].denied
    notified = [n for n in configured.services.notifications if n.topic == topic_arn]
    assert [n.published_by for n in notified] == [CLOUDWATCH, CLOUDWATCH]
