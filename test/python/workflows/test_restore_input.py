"""Restore input validation, on one emulation shared by every case of this module: a bad input
fails the run with InvalidInput naming the field, and nothing in EC2 or SSM changes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raidsnap.models import (
    MOUNT_POINT_PATTERN,
    SYSTEM_DIRECTORIES,
    SYSTEM_TREES,
    RestoreInput,
    parse_restore_input,
    system_directory,
)
from raidsnap.text import printable
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import backed_up, lock_table, make_array

READS = ("Describe", "Get", "List")
FIELDS = set(RestoreInput.model_fields)


@pytest.fixture(scope="module")
def shared(template: Path) -> Iterator[Emulation]:
    """An array with one complete set; every case runs a restore against it."""
    with Emulation(template) as emu:
        fx = make_array(emu.hosts, "db1", 3)
        backed_up(emu.hosts, emu.run, fx)
        yield emu


def changes(emu: Emulation, since: int) -> list[str]:
    return [
        f"{c.service}:{c.operation}"
        for c in emu.double.calls[since:]
        if c.applied and c.service in ("ec2", "ssm") and not c.operation.startswith(READS)
    ]


def no_lock_held(emu: Emulation) -> bool:
    ddb = boto3.client("dynamodb")
    table = lock_table()
    return "Item" not in ddb.get_item(TableName=table, Key={"array": {"S": "db1"}})


def refused(emu: Emulation, payload: Any) -> tuple[str | None, str]:
    mark = len(emu.double.calls)
    run = emu.run("restore", payload)
    assert run.status == "FAILED"
    assert changes(emu, mark) == [], "an invalid input changed something"
    assert no_lock_held(emu)
    return run.error, run.cause or ""


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({}, "array"),
        ({"array": "no spaces"}, "array"),
        ({"array": 7}, "array"),
        ({"array": "db1", "setId": "../etc"}, "setId"),
        ({"array": "db1", "setId": 5}, "setId"),
        ({"array": "db1", "targetInstanceId": "i-xyz"}, "targetInstanceId"),
        ({"array": "db1", "targetInstanceId": "i-0123456789abcdef0"}, "targetInstanceId"),
        ({"array": "db1", "volumeType": "gp4"}, "volumeType"),
        ({"array": "db1", "volumeType": "gp3", "iops": 2999}, "iops"),
        ({"array": "db1", "volumeType": "gp3", "iops": 80001}, "iops"),
        ({"array": "db1", "volumeType": "io1", "iops": 64001}, "iops"),
        # In range, but more than the members' size takes (32 GiB: gp3 16,000; io1 1,600)
        ({"array": "db1", "volumeType": "gp3", "iops": 20000}, "iops"),
        ({"array": "db1", "volumeType": "io1", "iops": 2000}, "iops"),
        ({"array": "db1", "iops": 4000, "throughput": 1500}, "throughput"),
        ({"array": "db1", "volumeType": "gp2", "iops": 3000}, "iops"),
        ({"array": "db1", "volumeType": "st1", "iops": 3000}, "iops"),
        ({"array": "db1", "iops": "3000"}, "iops"),
        ({"array": "db1", "iops": 3000.5}, "iops"),
        ({"array": "db1", "volumeType": "gp3", "throughput": 124}, "throughput"),
        ({"array": "db1", "volumeType": "gp3", "throughput": 2001}, "throughput"),
        ({"array": "db1", "volumeType": "io2", "throughput": 500}, "throughput"),
        ({"array": "db1", "initialization": "fast"}, "initialization"),
        ({"array": "db1", "initialization": "rate"}, "initializationRate"),
        (
            {"array": "db1", "initialization": "rate", "initializationRate": 99},
            "initializationRate",
        ),
        (
            {"array": "db1", "initialization": "rate", "initializationRate": 301},
            "initializationRate",
        ),
        (
            {"array": "db1", "initialization": "prewarm", "initializationRate": 200},
            "initializationRate",
        ),
        ({"array": "db1", "initialization": "none", "allowOptimizing": True}, "allowOptimizing"),
        ({"array": "db1", "allowOptimizing": "yes"}, "allowOptimizing"),
        ({"array": "db1", "fsrTimeoutSeconds": 10}, "fsrTimeoutSeconds"),
        ({"array": "db1", "mountPoint": "data"}, "mountPoint"),
        ({"array": "db1", "mountPoint": "/"}, "mountPoint"),
        ({"array": "db1", "mountPoint": "/mnt/../etc"}, "mountPoint"),
        ({"array": "db1", "mountPoint": "/mnt/a b"}, "mountPoint"),
        ({"array": "db1", "mountPoint": "/mnt/x;reboot"}, "mountPoint"),
        ({"array": "db1", "mdDevice": "/dev/sda"}, "mdDevice"),
        ({"array": "db1", "mdUuid": "not-a-uuid"}, "mdUuid"),
        ({"array": "db1", "readOnly": "true"}, "readOnly"),
        ({"array": "db1", "mode": "swap"}, "mode"),
        ({"array": "db1", "force": True}, "force"),
        (["db1"], "input"),
        ("db1", "input"),
    ],
)
def test_each_bad_field_fails_with_invalid_input_naming_it_and_changes_nothing(
    shared: Emulation, payload: Any, field: str
) -> None:
    error, cause = refused(shared, payload)
    assert error == "InvalidInput"
    assert cause.startswith(f"{field}:"), cause


# Mount points a restore refuses: "/" and the system directories, and what lies under the system
# trees; and ordinary ones below those directories that stay allowed.
SYSTEM_MOUNT_POINTS = {
    "/": "/",
    "/etc": "/etc",
    "/etc/cron.d": "/etc",
    "/usr/local": "/usr",
    "/var": "/var",
    "/boot": "/boot",
    "/root/x": "/root",
    "/proc": "/proc",
    "/tmp/x": "/tmp",
}
ALLOWED_MOUNT_POINTS = ["/data", "/var/lib/postgresql", "/mnt/md0", "/srv/db"]


@pytest.mark.parametrize("mount_point", sorted(SYSTEM_MOUNT_POINTS))
def test_a_system_mount_point_fails_with_invalid_input_and_changes_nothing(
    shared: Emulation, mount_point: str
) -> None:
    error, cause = refused(shared, {"array": "db1", "mountPoint": mount_point})
    assert error == "InvalidInput"
    assert cause.startswith("mountPoint:"), cause
    if mount_point != "/":  # "/" is refused by the pattern already
        assert "system directory" in cause and repr(mount_point) in cause, cause
    assert system_directory(mount_point) == SYSTEM_MOUNT_POINTS[mount_point]


@pytest.mark.parametrize("mount_point", ALLOWED_MOUNT_POINTS)
def test_an_ordinary_mount_point_below_a_system_directory_is_accepted(mount_point: str) -> None:
    assert system_directory(mount_point) is None
    assert parse_restore_input({"array": "db1", "mountPoint": mount_point}).mountPoint == (
        mount_point
    )


@pytest.mark.parametrize(
    ("path", "found"),
    [
        ("/", "/"),
        ("//etc/", "/etc"),
        ("/mnt/../etc", "/etc"),
        ("/./usr/lib", "/usr"),
        ("/var/log/app", "/var/log"),
        ("/var/run", "/var/run"),
        ("/home", "/home"),
        ("/mnt", "/mnt"),
        ("/media", "/media"),
        ("/opt", "/opt"),
        ("/srv", "/srv"),
        ("/etcetera", None),
        ("/usrdata", None),
        ("/home/data", None),
        ("/opt/db", None),
        ("/media/backup", None),
        ("/var/lib/mysql", None),
    ],
)
def test_the_rule_normalizes_before_it_looks(path: str, found: str | None) -> None:
    assert system_directory(path) == found


def test_the_rule_covers_every_listed_directory_and_nothing_beside_it() -> None:
    for tree in SYSTEM_TREES:
        assert system_directory(tree) == tree and system_directory(tree + "/x/y") == tree
        assert system_directory(tree + "x") is None or tree + "x" in SYSTEM_TREES
    for directory in SYSTEM_DIRECTORIES:
        assert system_directory(directory) == directory
        assert system_directory(directory + "/x") in (None, *SYSTEM_TREES)


def test_replace_on_a_target_that_does_not_hold_the_array_is_refused(shared: Emulation) -> None:
    ec2 = boto3.client("ec2")
    other = ec2.run_instances(
        ImageId="ami-0abcdef1234567890",
        MinCount=1,
        MaxCount=1,
        Placement={"AvailabilityZone": "us-east-1a"},
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": "raidsnap:array", "Value": "db1-other"}]}
        ],
    )["Instances"][0]["InstanceId"]
    error, cause = refused(shared, {"array": "db1", "targetInstanceId": other, "mode": "replace"})
    assert (error, cause.split(":")[0]) == ("InvalidInput", "mode")


def _not(pattern: str) -> Any:
    return lambda text: re.fullmatch(pattern, text) is None


# One bad field on top of a valid request, drawn from what each field must not be.
BAD_FIELDS = st.one_of(
    st.builds(lambda v: {"array": v}, st.text().filter(_not(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}"))),
    st.builds(lambda v: {"setId": v}, st.integers() | st.booleans() | st.none()),
    st.builds(lambda v: {"targetInstanceId": v}, st.text().filter(_not(r"i-[0-9a-f]{8,17}"))),
    st.builds(
        lambda v: {"volumeType": v},
        st.text().filter(lambda t: t not in ("gp3", "gp2", "io1", "io2", "st1", "sc1", "standard")),
    ),
    st.builds(
        lambda v: {"volumeType": "gp3", "iops": v},
        st.integers().filter(lambda i: not 3000 <= i <= 80000),
    ),
    st.builds(
        lambda v: {"volumeType": "gp3", "throughput": v},
        st.integers().filter(lambda i: not 125 <= i <= 2000),
    ),
    st.builds(
        lambda t, v: {"volumeType": t, "throughput": v},
        st.sampled_from(["gp2", "io1", "io2", "st1", "sc1"]),
        st.integers(125, 2000),
    ),
    st.builds(
        lambda v: {"initialization": "rate", "initializationRate": v},
        st.integers().filter(lambda i: not 100 <= i <= 300),
    ),
    st.builds(lambda v: {"mountPoint": v}, st.text().filter(_not(MOUNT_POINT_PATTERN))),
    st.builds(
        lambda d, rest: {"mountPoint": d + rest},
        st.sampled_from(SYSTEM_TREES),
        st.sampled_from(["", "/x", "/cron.d", "/local/lib"]),
    ),
    st.builds(lambda d: {"mountPoint": d}, st.sampled_from(SYSTEM_DIRECTORIES)),
    st.builds(lambda v: {"mode": v}, st.text().filter(lambda t: t not in ("attach", "replace"))),
    st.builds(lambda v: {"readOnly": v}, st.text() | st.integers()),
    st.builds(
        lambda k: {k: 1},
        st.text(min_size=1, max_size=20).filter(lambda k: k not in FIELDS),
    ),
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(bad=BAD_FIELDS)
def test_no_input_that_reaches_invalid_input_changes_anything(
    shared: Emulation, bad: dict[str, Any]
) -> None:
    payload = {"array": "db1", **bad}
    error, cause = refused(shared, payload)
    assert error == "InvalidInput"
    # The cause starts with the field it names (a field name may itself hold a colon), shown
    # as printable text (a control character in it becomes a space).
    named = {printable(k) for k in set(bad) | {"initializationRate"}}
    assert any(cause.startswith(f"{k}: ") for k in named), cause
