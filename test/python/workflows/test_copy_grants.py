"""What the copy workflow's grants allow, as AWS authorizes CopySnapshot against the synthesized
roles: its resource-level permissions "apply to both the snapshot copy and the source snapshot"
(Service Authorization Reference, Amazon EC2, ec2:CopySnapshot), whose condition keys include
aws:RequestTag, aws:TagKeys and ec2:Owner but no aws:ResourceTag. So every statement that allows
it must hold for both: the copy carries raidsnap's tags, the source is of an accepted owner."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from raidsnap_emulation.double import acting_as
from raidsnap_emulation.harness import COPIES_CONFIG, Emulation, Peer, synthesize
from raidsnap_emulation.world import make_array, sets_of

WEST = "us-west-2"


@pytest.fixture(scope="module")
def copies_template() -> Path:
    return synthesize(config=COPIES_CONFIG)


@pytest.fixture
def two(copies_template: Path, template: Path) -> Iterator[tuple[Emulation, Peer]]:
    with Emulation(copies_template) as emu:
        yield emu, emu.deploy(WEST, template=template)


def _copy_role(peer: Peer) -> str:
    name = next(
        f for f in peer.stack.template.of_type("AWS::Lambda::Function") if "CopyProgress" in f
    )
    return peer.stack.prefix + name


def _copy(peer: Peer, source: str, tags: dict[str, str]) -> str:
    """CopySnapshot of ``source`` (in us-east-1) as the copy workflow's function there; the
    error code, or "allowed"."""
    spec = [{"ResourceType": "snapshot", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
    with peer.inside(), acting_as(_copy_role(peer)):
        try:
            peer.client("ec2").copy_snapshot(
                SourceRegion="us-east-1",
                SourceSnapshotId=source,
                **({"TagSpecifications": spec} if tags else {}),
            )
        except ClientError as err:
            return str(err.response["Error"]["Code"])
    return "allowed"


def test_the_copy_role_cannot_make_a_copy_without_raidsnaps_tags(
    two: tuple[Emulation, Peer],
) -> None:
    emu, west = two
    fx = make_array(emu.hosts, "db1", 2)
    run = emu.run("backup", {"array": fx.name})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    source = str(sets_of("db1")[run.output["setId"]][0]["SnapshotId"])
    # WHEN the copy role there copies a set's snapshot with no tags at all: a copy no retention,
    # restore or cleanup of raidsnap would ever find, billed there until someone notices
    outcome = _copy(west, source, {})
    # THEN IAM refuses it (the copy of a snapshot of this account is owned by this account: a
    # statement scoped by the owner alone would allow the copy as well as the source)
    assert outcome == "UnauthorizedOperation"
