"""The local world's endpoint: a call that arrives over HTTP, from another process, gets the
answer the double gives the executions' own calls (where moto alone would answer otherwise),
errors keep their codes, answers carry the emulated clock's Date, and the world's controls
need its token."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from datetime import timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import boto3
import pytest
from botocore.client import BaseClient
from botocore.exceptions import ClientError

from raidsnap_emulation.clock import VirtualClock
from raidsnap_emulation.double import AwsDouble
from raidsnap_emulation.endpoint import TOKEN_HEADER, ControlError, serving

TOKEN = "a-token"  # noqa: S105 - the test world's controls


def _controls(name: str, body: dict[str, Any]) -> dict[str, Any]:
    if name == "echo":
        return {"echo": body}
    raise ControlError(f"no control {name!r}")


@pytest.fixture
def url(double: AwsDouble, clock: VirtualClock) -> Iterator[str]:
    with serving("us-east-1", _controls, TOKEN, clock.now) as served:
        yield served


@pytest.fixture
def over_http(double: AwsDouble, url: str) -> Callable[[str], BaseClient]:
    """A client that really sends its calls to the endpoint: in this process botocore is the
    double's, so the client side goes around it, as a client in another process does."""
    original = double._original
    assert original is not None

    def client(service: str) -> BaseClient:
        made: Any = boto3.client(service, region_name="us-east-1", endpoint_url=url)  # type: ignore[call-overload]

        def call(operation: str, params: dict[str, Any]) -> Any:
            return original(made, operation, params)

        made._make_api_call = call
        return made  # type: ignore[no-any-return]

    return client


def _snapshot(clock: VirtualClock) -> str:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    volume = ec2.create_volume(AvailabilityZone="us-east-1a", Size=100, VolumeType="gp3")
    clock.advance(10)
    return str(ec2.create_snapshot(VolumeId=volume["VolumeId"])["SnapshotId"])


def test_a_snapshot_seen_over_http_is_in_progress_as_the_double_says(
    over_http: Callable[[str], BaseClient], clock: VirtualClock
) -> None:
    # GIVEN a snapshot just started (moto alone completes it at once)
    snapshot = _snapshot(clock)
    clock.advance(30)
    # WHEN another process asks EC2 about it over the endpoint
    ec2: Any = over_http("ec2")
    seen = ec2.describe_snapshots(SnapshotIds=[snapshot])["Snapshots"][0]
    # THEN it sees the double's answer: pending, part of the way
    assert seen["State"] == "pending"
    assert seen["Progress"] not in ("", "100%")


def test_fast_snapshot_restore_works_over_http_where_moto_has_none(
    over_http: Callable[[str], BaseClient], clock: VirtualClock
) -> None:
    snapshot = _snapshot(clock)
    clock.advance(24 * 3600)
    ec2: Any = over_http("ec2")
    enabled = ec2.enable_fast_snapshot_restores(
        AvailabilityZones=["us-east-1a"], SourceSnapshotIds=[snapshot]
    )
    assert [s["State"] for s in enabled["Successful"]] == ["enabling"]
    described = ec2.describe_fast_snapshot_restores(
        Filters=[{"Name": "snapshot-id", "Values": [snapshot]}]
    )["FastSnapshotRestores"]
    assert [(s["SnapshotId"], s["AvailabilityZone"]) for s in described] == [
        (snapshot, "us-east-1a")
    ]


def test_errors_come_back_with_their_codes_in_each_protocol(
    over_http: Callable[[str], BaseClient],
) -> None:
    ec2: Any = over_http("ec2")
    with pytest.raises(ClientError) as refused:
        ec2.describe_volumes(VolumeIds=["vol-0123456789abcdef0"])
    assert refused.value.response["Error"]["Code"] == "InvalidVolume.NotFound"
    sfn: Any = over_http("stepfunctions")
    arn = "arn:aws:states:us-east-1:123456789012:execution:none:none"
    with pytest.raises(ClientError) as missing:
        sfn.describe_execution(executionArn=arn)
    assert missing.value.response["Error"]["Code"] == "ExecutionDoesNotExist"
    assert missing.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_answers_are_dated_on_the_emulated_clock(
    over_http: Callable[[str], BaseClient], clock: VirtualClock
) -> None:
    clock.advance(3 * 24 * 3600)
    ddb: Any = over_http("dynamodb")
    answer = ddb.list_tables()
    date = parsedate_to_datetime(answer["ResponseMetadata"]["HTTPHeaders"]["date"])
    assert abs(date - clock.now()) < timedelta(seconds=2)


def test_the_endpoint_listens_on_loopback_only(url: str) -> None:
    assert url.startswith("http://127.0.0.1:")


def _post(url: str, path: str, token: str | None) -> tuple[int, dict[str, Any]]:
    headers = {TOKEN_HEADER: token} if token else {}
    request = urllib.request.Request(  # noqa: S310 - the test's endpoint, on loopback
        url + path, data=b'{"a": 1}', headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        body = err.read()
        return err.code, json.loads(body) if body.startswith(b"{") else {}


def test_controls_answer_with_the_token_and_refuse_without_it(url: str) -> None:
    assert _post(url, "/_raidsnap/echo", TOKEN) == (200, {"echo": {"a": 1}})
    assert _post(url, "/_raidsnap/echo", None)[0] == 403
    assert _post(url, "/_raidsnap/echo", "another")[0] == 403
    status, said = _post(url, "/_raidsnap/nothing", TOKEN)
    assert (status, said) == (400, {"error": "no control 'nothing'"})


def test_a_request_for_a_service_it_does_not_answer_is_refused_by_name(url: str) -> None:
    request = urllib.request.Request(  # noqa: S310 - the test's endpoint, on loopback
        url + "/",
        data=b"Action=ListBuckets",
        headers={
            "Authorization": "AWS4-HMAC-SHA256 Credential=k/20260101/us-east-1/s3/aws4_request"
        },
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)  # noqa: S310
    assert refused.value.code == 400
    assert "s3" in refused.value.read().decode()
