"""The end of a followed run shows what it cost: `raidsnap backup`, `restore` and `drill`
follow the run they start, and `raidsnap status RUN --follow` a run already going (a recovery,
which an alarm starts). Each ends with the cost lines `raidsnap status RUN` shows once the run
has ended, computed by the same code, succeeded or failed; a cost that cannot be read says so in
one line and the run's outcome stays.

The commands run as on AWS (no --emulation) against an account this test holds (an emulation),
so that the test can read the run's history after the command and price it by hand with the
price table's list prices."""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
from cli_runner import Cli, json_of
from typer.testing import Result

from raidsnap_cli import backends, common
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    ArrayFixture,
    alarm_event,
    backed_up,
    launch_instance,
    make_array,
)

REPO = Path(__file__).resolve().parents[3]
TABLE = json.loads((REPO / "docs" / "costs" / "prices.json").read_text())


def usd(name: str) -> Decimal:
    return Decimal(str(TABLE["prices"][name]["usd"]))


@dataclass
class Account:
    emu: Emulation
    fx: ArrayFixture
    cli: Cli

    def __call__(self, *args: str) -> Result:
        return self.cli(*args, "--region", "us-east-1")


@pytest.fixture
def account(template: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Account]:
    """db1 (3 members) in an account the commands find as on AWS: its state machines by their
    Comments, its tables by their keys. Polled often: the runs go on emulated time."""
    monkeypatch.setattr(backends, "AWS_POLL_SECONDS", 0.02)
    with Emulation(template) as emu:
        yield Account(emu, make_array(emu.hosts, "db1", 3), Cli(template))


def cost_rows(screen: str) -> list[str]:
    """The lines of the one ``cost`` row of a grid (its label, then its value's lines below it
    with no label)."""
    found = [i for i, line in enumerate(screen.splitlines()) if re.match(r"\s*cost  ", line)]
    assert len(found) == 1, f"{len(found)} cost rows in:\n{screen}"
    lines = screen.splitlines()
    first = lines[found[0]]
    column = re.match(r"\s*cost\s+", first).end()  # type: ignore[union-attr]
    rows = [first[column:].rstrip()]
    for line in lines[found[0] + 1 :]:
        if line[:column].strip() or not line[column:].strip():
            break
        rows.append(line[column:].rstrip())
    return rows


def execution_named(result: Result) -> str:
    found = re.search(r"execution (arn:aws:states:\S+)", result.output)
    assert found, result.output
    return found.group(1)


def history(arn: str) -> list[dict[str, Any]]:
    sfn = boto3.client("stepfunctions")
    pages = sfn.get_paginator("get_execution_history").paginate(executionArn=arn)
    return [e for page in pages for e in page["events"]]


def output_of(arn: str) -> dict[str, Any]:
    described = boto3.client("stepfunctions").describe_execution(executionArn=arn)
    return dict(json.loads(described["output"]))


def by_hand(events: list[dict[str, Any]]) -> tuple[int, Decimal, int]:
    """Transitions, GB-seconds and requests of a run that retried nothing: each state entered
    is one transition (AWS Step Functions pricing: "charged for the total number of state
    transitions"); each invocation one request, and its duration from its start to its end
    event rounded up to the millisecond, times 256 MB (AWS Lambda pricing)."""
    assert not [e for e in events if e["type"] in ("LambdaFunctionFailed", "TaskFailed")]
    transitions = sum(1 for e in events if e["type"].endswith("StateEntered"))
    # A plain Lambda Task's invocation (LambdaFunctionStarted to Succeeded), and a callback
    # Task's (lambda:invoke.waitForTaskToken: TaskStarted to TaskSubmitted, when the function
    # returned; the answer that ends the Task later is no invocation).
    started = {
        e["id"]: e["timestamp"]
        for e in events
        if e["type"] in ("LambdaFunctionStarted", "TaskStarted")
    }
    ended = [e for e in events if e["type"] in ("LambdaFunctionSucceeded", "TaskSubmitted")]
    millis = [
        math.ceil((e["timestamp"] - started[e["previousEventId"]]).total_seconds() * 1000)
        for e in ended
    ]
    gb_seconds = Decimal(sum(millis)) / 1000 * Decimal(256) / Decimal(1024)
    return transitions, gb_seconds, len(millis)


def money(value: Decimal) -> str:
    """As the price table's README example writes a small sum: cents, or two significant
    figures below a cent."""
    return f"${value:.2f}" if value >= Decimal("0.01") else f"${float(value):.2g}"


# ---------------------------------------------------------------------- backup


def test_a_followed_backup_ends_with_its_cost_priced_by_hand(account: Account) -> None:
    result = account("backup", "db1")

    assert result.exit_code == 0, result.output
    arn = execution_named(result)
    transitions, gb_seconds, requests = by_hand(history(arn))
    total = (
        transitions * usd("transitions1000") / 1000
        + gb_seconds * usd("lambdaGbSecondArm")
        + requests * usd("lambdaRequests1M") / 1_000_000
    )
    output = json.loads(
        boto3.client("stepfunctions").describe_execution(executionArn=arn)["output"]
    )
    snapshots = boto3.client("ec2").describe_snapshots(SnapshotIds=output["snapshotIds"])
    # This account's snapshots give no FullSnapshotSizeInBytes: each counts its volume's size.
    gib = sum(Decimal(s["VolumeSize"]) for s in snapshots["Snapshots"])
    assert cost_rows(result.stdout) == [
        f"{money(total)} this run",
        f"state transitions {transitions}",
        f"Lambda duration {gb_seconds.normalize():f} GB-s",
        f"Lambda requests {requests}",
        f"{money(gib * usd('snapshotGbMonth'))} a month: snapshot storage added (at most) "
        f"(3 snapshots, {gib.normalize():f} GiB (volume size))",
    ]
    # below what the run made: its outcome first, its cost last
    assert result.stdout.index("SUCCEEDED backup") < result.stdout.index("member 2")
    assert result.stdout.index("member 2") < result.stdout.index("this run")
    # the same lines `raidsnap status RUN` shows
    assert cost_rows(account("status", arn).stdout) == cost_rows(result.stdout)


def test_a_followed_backup_that_failed_ends_with_its_cost(account: Account) -> None:
    result = account("backup", "db9")

    assert result.exit_code == 1, result.output
    arn = execution_named(result)
    transitions, requests = by_hand_failed(history(arn))
    rows = cost_rows(result.stderr)
    assert rows[1:4] == [
        f"state transitions {transitions}",
        rows[2],
        f"Lambda requests {requests}",
    ]
    assert re.fullmatch(r"Lambda duration [0-9.]+ GB-s", rows[2]), rows
    # the error first: what failed, then what it cost
    assert result.stderr.index("ArrayNotFound") < result.stderr.index("this run")
    assert cost_rows(account("status", arn).stdout) == rows


def by_hand_failed(events: list[dict[str, Any]]) -> tuple[int, int]:
    """Transitions and requests of a run whose step failed without a retry (ArrayNotFound is
    not retried): its failed invocation is a request as a succeeded one is."""
    transitions = sum(1 for e in events if e["type"].endswith("StateEntered"))
    requests = sum(1 for e in events if e["type"] == "LambdaFunctionStarted")
    return transitions, requests


# ---------------------------------------------------------------------- restore


def test_a_followed_restore_ends_with_its_cost_and_its_volumes_month(account: Account) -> None:
    backed_up(account.emu.hosts, account.emu.run, account.fx)

    result = account("restore", "db1", "--mode", "replace", "--initialization", "none", "--yes")

    assert result.exit_code == 0, result.output
    arn = execution_named(result)
    output = json.loads(
        boto3.client("stepfunctions").describe_execution(executionArn=arn)["output"]
    )
    volumes = boto3.client("ec2").describe_volumes(VolumeIds=output["volumeIds"])["Volumes"]
    month = sum(
        v["Size"] * usd("gp3GbMonth")
        + max(0, v["Iops"] - 3000) * usd("gp3IopsMonth")
        + max(0, v["Throughput"] - 125) * usd("gp3ThroughputMonth")
        for v in volumes
    )
    rows = cost_rows(result.stdout)
    assert f"{money(month)} a month: volumes created, while kept (3 volumes)" in rows, rows
    assert rows[1] == f"state transitions {by_hand(history(arn))[0]}"
    assert cost_rows(account("status", arn).stdout) == rows


# ---------------------------------------------------------------------- drill


def test_a_followed_drill_ends_with_its_cost_and_its_restores(account: Account) -> None:
    backed_up(account.emu.hosts, account.emu.run, account.fx)
    host = launch_instance("db1-drill", account.fx.availability_zone, tag_array=False)
    boto3.client("ec2").create_tags(
        Resources=[host], Tags=[{"Key": "raidsnap:array", "Value": "db1-drill"}]
    )

    result = account("drill", "db1", "--target", host, "--initialization", "none")

    assert result.exit_code == 0, result.output
    arn = execution_named(result)
    restores = boto3.client("stepfunctions").list_executions(
        stateMachineArn=account.emu.state_machines["restore"]
    )["executions"]
    (restore,) = restores
    both = by_hand(history(arn))[0] + by_hand(history(restore["executionArn"]))[0]
    rows = cost_rows(result.stdout)
    # the drill's transitions and those of the restore it ran; the volumes it made and removed
    assert rows[1] == f"state transitions {both}", rows
    assert any(re.fullmatch(r"volumes while they lived 3 volumes, .*", r) for r in rows), rows
    assert cost_rows(account("status", arn).stdout) == rows


# ---------------------------------------------------------------------- recovery


def hold_until_followed(account: Account, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """The recovery waits in its first step until the command follows it: the command sees it
    running, whatever the speed of this machine (time stands still meanwhile: the waiting
    invocation is part of the run, running)."""
    followed = threading.Event()
    original_follow = common.follow

    def following(*args: Any, **kwargs: Any) -> Any:
        followed.set()
        return original_follow(*args, **kwargs)

    monkeypatch.setattr(common, "follow", following)
    router = account.emu.router
    assert router is not None
    alarm = next(n for n, f in router.functions.items() if ".recovery_start." in f.handler)

    def invoke(params: dict[str, Any]) -> Any:
        # The alarm's own function starts the recovery; the recovery's steps wait.
        while str(params["FunctionName"]).rsplit(":", 1)[-1] != alarm and not followed.is_set():
            time.sleep(0.01)
        return router(params)

    account.emu.double.route("lambda", "Invoke", invoke)
    return followed


def test_a_followed_recovery_ends_with_its_cost_and_its_restores(
    account: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    backed_up(account.emu.hosts, account.emu.run, account.fx)
    account.emu.hosts.lose_member(account.fx.instance_id, account.fx.member_ids[1])
    followed = hold_until_followed(account, monkeypatch)
    started = account.emu.invoke("recovery_start", alarm_event(account.fx.instance_id))
    arn = str(started.result["executionArn"])

    result = account("status", arn, "--follow")

    assert followed.is_set()
    assert result.exit_code == 0, result.output
    assert "SUCCEEDED recovery" in result.stdout
    (listed,) = boto3.client("stepfunctions").list_executions(
        stateMachineArn=account.emu.state_machines["restore"]
    )["executions"]
    account.emu.wait(listed["executionArn"])
    both = by_hand(history(arn))[0] + by_hand(history(listed["executionArn"]))[0]
    rows = cost_rows(result.stdout)
    assert rows[1] == f"state transitions {both}", rows
    assert cost_rows(account("status", arn).stdout) == rows


def test_status_follow_as_json_ends_with_the_run_and_its_cost(
    account: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    backed_up(account.emu.hosts, account.emu.run, account.fx)
    account.emu.hosts.lose_member(account.fx.instance_id, account.fx.member_ids[1])
    hold_until_followed(account, monkeypatch)
    started = account.emu.invoke("recovery_start", alarm_event(account.fx.instance_id))
    arn = str(started.result["executionArn"])

    result = account("status", arn, "--follow", "--json")

    assert result.exit_code == 0, result.output
    body = json_of(result.stdout)
    assert body["status"] == "SUCCEEDED"
    later = json_of(account("status", arn, "--json").stdout)
    assert body["cost"] == later["cost"]
    assert body["cost"]["lines"][0].endswith(" this run")


# ---------------------------------------------------------------------- unreadable


def test_a_cost_that_cannot_be_read_says_so_in_one_line_and_the_outcome_stays(
    account: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    original_follow = common.follow

    def then_denied(*args: Any, **kwargs: Any) -> Any:
        done = original_follow(*args, **kwargs)
        account.emu.double.fail(
            "stepfunctions", "GetExecutionHistory", 100, code="AccessDeniedException",
            message="not authorized to perform states:GetExecutionHistory",
        )  # fmt: skip
        return done

    monkeypatch.setattr(common, "follow", then_denied)

    result = account("backup", "db1")

    assert result.exit_code == 0, result.output
    name = execution_named(result).rsplit(":", 1)[1]
    assert f"SUCCEEDED backup {name}" in result.stdout
    assert "member 2" in result.stdout
    # one line, which a narrow screen wraps
    assert " ".join(cost_rows(result.stdout)) == (
        f"not computed now; raidsnap status {name} computes it later (AWS error "
        "AccessDeniedException: not authorized to perform states:GetExecutionHistory)"
    )
