"""A run's progress in the words of the person following it: steps with counts, the moment the
array is mounted, the prewarm's progress and what it read, on emulated time; never state names
or event types."""

from __future__ import annotations

import io
import itertools
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from cli_runner import Cli, line_of
from moto import mock_aws
from rich.console import Console

from raidsnap_cli.follow import follow
from raidsnap_cli.progress import Narrator, ec2_counter

T0 = datetime(2026, 1, 5, 3, 0, tzinfo=UTC)
INTERNALS = ("StateEntered", "LambdaFunction", "FollowOldMembers", "PollPrewarm", "states done")


@pytest.fixture
def cli(template: Path) -> Cli:
    return Cli(template)


class History:
    """A restore's history, built state by state as the restore workflow writes it."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.at = T0
        self.add("ExecutionStarted", {})

    def add(self, kind: str, details: dict[str, Any], after: float = 0) -> None:
        self.at += timedelta(seconds=after)
        key = kind[0].lower() + kind[1:] + "EventDetails"
        self.events.append(
            {"id": len(self.events) + 1, "type": kind, "timestamp": self.at, key: details}
        )

    def state(self, kind: str, name: str, after: float = 0, **output: Any) -> None:
        self.add(f"{kind}StateEntered", {"name": name}, after)
        if kind != "Choice":
            self.add(f"{kind}StateExited", {"name": name, "output": json.dumps(output)})


PLAN = {
    "members": [{"sizeGib": 100}, {"sizeGib": 100}, {"sizeGib": 100}],
    "mountPoint": "/data",
    "targetInstanceId": "i-0123456789abcdef0",
}
OLD = ["vol-old0", "vol-old1", "vol-old2"]
NEW = ["vol-new0", "vol-new1", "vol-new2"]


def replace_history() -> History:
    h = History()
    h.state("Task", "Prepare", 1, plan=PLAN)
    h.state("Task", "CreateVolumes", 1, volumes={"status": "creating", "ids": NEW})
    h.state("Task", "ReleaseOldArray", 1)
    h.state("Task", "PollRelease", 3)
    h.state("Task", "DetachOldMembers", 1, old={"status": "detaching", "volumeIds": OLD})
    h.state("Wait", "WaitForOldMembers", 0)
    h.state("Task", "FollowOldMembers", 5, old={"status": "detached", "volumeIds": OLD})
    h.state("Task", "CheckVolumes", 1, volumes={"status": "available", "ids": NEW})
    h.state("Task", "AttachVolumes", 1, attach={"status": "attaching"})
    h.state("Task", "FollowAttachments", 3, attach={"status": "attached"})
    h.state("Task", "Assemble", 1)
    h.state("Task", "PollAssemble", 5)
    h.state("Choice", "IsPrewarmNeeded", 0)
    prewarm = {"status": "pending", "predictedSeconds": 1200, "commandId": "c"}
    h.state("Task", "Prewarm", 1, plan=PLAN, prewarm=prewarm)
    done = {
        "status": "success",
        "result": {"bytes": 300 * 2**30, "seconds": 1210.0, "mibPerSecond": 253.9},
    }
    h.state("Task", "PollPrewarm", 1210, plan=PLAN, prewarm=done)
    h.state("Task", "Finish", 1, finish={})
    h.add("ExecutionSucceeded", {}, 0)
    return h


def told(events: list[dict[str, Any]]) -> list[str]:
    narrator = Narrator("restore")
    for event in events:
        narrator.take(event)
    return [line.text for line in narrator.lines]


def test_a_replace_is_told_in_steps_with_counts_the_mount_and_the_prewarm() -> None:
    lines = told(replace_history().events)

    assert lines == [
        "checking the set, the target and its SSM agent",
        "creating 3 volumes",
        "releasing the old array (unmount, stop md)",
        "detaching old members",
        "detaching old members: 3/3",
        "creating 3 volumes: 3/3",
        "attaching new volumes",
        "attaching new volumes: 3/3",
        "assembling the array and mounting it",
        "ARRAY MOUNTED at /data — usable now",
        "prewarming: reading every block once",
        "prewarm done: 300.0 GiB at 254 MiB/s in 20 min",
        "finishing",
        "done",
    ]


def test_the_prewarm_is_told_by_its_prediction_percent_rate_and_eta() -> None:
    h = replace_history()
    narrator = Narrator("restore")
    upto = next(i for i, e in enumerate(h.events) if e["type"] == "TaskStateExited"
                and e["taskStateExitedEventDetails"]["name"] == "Prewarm")  # fmt: skip
    for event in h.events[: upto + 1]:
        narrator.take(event)
    begun = narrator.step_since
    assert begun is not None

    said = narrator.prewarm_progress(begun + timedelta(seconds=600))

    # 300 GiB predicted in 1200 s: half way after 600 s, at 256 MiB/s, 10 min left
    assert said == "~50% by the prediction at about 256 MiB/s, about 10 min left (ETA 03:20 UTC)"
    assert narrator.lines[-1].text == f"prewarming 300 GiB: {said}"


def test_a_failed_run_is_told_by_its_error_and_cause() -> None:
    h = History()
    h.state("Task", "Prepare", 1, plan=PLAN)
    cause = json.dumps({"errorType": "InstanceNotReadyError", "errorMessage": "agent offline"})
    h.add("ExecutionFailed", {"error": "InstanceNotReady", "cause": cause}, 1)

    assert told(h.events)[-1] == "failed: InstanceNotReady (InstanceNotReadyError: agent offline)"


@pytest.fixture
def ec2() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("ec2", region_name="us-east-1")


def test_while_a_step_waits_ec2_gives_its_count(ec2: Any) -> None:
    # GIVEN three new volumes, two of them attached to the target so far
    instance = ec2.run_instances(ImageId="ami-12345678", MinCount=1, MaxCount=1)["Instances"][0]
    zone = instance["Placement"]["AvailabilityZone"]
    ids = [ec2.create_volume(Size=1, AvailabilityZone=zone)["VolumeId"] for _ in range(3)]
    for device, volume in zip(("/dev/sdf", "/dev/sdg"), ids[:2], strict=False):
        ec2.attach_volume(VolumeId=volume, InstanceId=instance["InstanceId"], Device=device)
    history = History()
    history.state("Task", "Prepare", 1, plan={**PLAN, "targetInstanceId": instance["InstanceId"]})
    history.state("Task", "CheckVolumes", 1, volumes={"status": "available", "ids": ids})
    history.state("Task", "AttachVolumes", 1, attach={"status": "attaching"})
    history.state("Wait", "WaitForAttachments", 0)

    class Running:
        def describe_execution(self, executionArn: str) -> dict[str, Any]:
            return {"name": "restore-db1", "status": "RUNNING" if self.polls < 1 else "FAILED"}

        polls = 0

        def get_execution_history(self, **kwargs: Any) -> dict[str, Any]:
            self.polls += 1
            return {"events": history.events[::-1] if self.polls == 1 else []}

    out = io.StringIO()
    # WHEN the restore is followed
    console = Console(file=out, width=200)
    follow(Running(), "arn", console, 0.0, now=lambda: history.at, workflow="restore",  # type: ignore[arg-type]
           counter=ec2_counter(ec2))  # fmt: skip

    # THEN the attach step is told with EC2's count
    assert re.search(r"\+\d+s\s+attaching new volumes: 2/3", out.getvalue()), out.getvalue()


def test_a_followed_replace_on_the_emulation_shows_steps_mount_prewarm_on_emulated_time(
    cli: Cli,
) -> None:
    result = cli(
        "restore", "db1", "--mode", "replace", "--initialization", "prewarm", "--yes",
        "--emulation", "--seed-backups", "1",
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    out = result.output
    assert re.search(r"\+\d+s\s+detaching old members: 3/3", out)
    assert re.search(r"\+\d+s\s+attaching new volumes: 3/3", out)
    mounted = line_of(out, "ARRAY MOUNTED at /data — usable now")
    done = line_of(out, "prewarm done: ")
    assert re.search(r"prewarm done: \d+\.\d GiB at \d+ MiB/s in ", done)
    assert out.index(mounted) < out.index(done)
    # emulated time: the prewarm waited minutes of it, which the lines and the total show
    offset = re.search(r"\+(\d+)m", done)
    assert offset and int(offset.group(1)) >= 1, done
    assert re.search(r"SUCCEEDED restore restore-db1-\S+ in [1-9]\d*m", out)
    # and no repeated line, no state-machine internals
    lines = [ln.split("  ", 2)[-1] for ln in out.splitlines()]
    assert all(a != b for a, b in itertools.pairwise(lines))
    for internal in INTERNALS:
        assert internal not in out, internal


def test_a_long_cause_is_one_headline_line_while_following() -> None:
    h = History()
    h.state("Task", "Prepare", 1, plan=PLAN)
    cause = "raidsnap-assemble failed on i-1 (exit 1): mdadm: no superblock\n" + "x" * 500
    h.add("ExecutionFailed", {"error": "CommandFailed", "cause": cause}, 1)

    line = told(h.events)[-1]

    assert (
        line
        == "failed: CommandFailed (raidsnap-assemble failed on i-1 (exit 1): mdadm: no superblock)"
    )
