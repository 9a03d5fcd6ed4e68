"""Edge cases of the restore's initialization decision (workflows/restore/
initialization.py, plan/restore_time.py) and its contracts, without AWS."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from raidsnap.errors import InvalidInputError
from raidsnap.models import parse_restore_input
from raidsnap.plan import restore_time as model
from raidsnap.workflows.restore import initialization
from raidsnap.workflows.restore.contracts import Initialization

# r6i.2xlarge as DescribeInstanceTypes gives it: 312.5 MB/s baseline, 1,250 MB/s maximum.
R6I_2XL = model.Bandwidth.from_mb(312.5, 1250.0, "r6i.2xlarge")


def test_auto_never_chooses_fsr_that_its_own_fsr_limit_gives_up_before_it_is_usable() -> None:
    # GIVEN 3 x 1 TiB members whose snapshots someone else enabled FSR for 50 min ago (a 1 TiB
    # bucket earns its first credit after an hour: FSR usable in ~10 min), a restore that
    # says it waits for FSR at most 60 s, on an instance far too slow to read 3 TiB quickly
    young = model.FsrNow("enabled", in_state_seconds=3000)
    shapes = [model.MemberShape(1024, 1000.0, young) for _ in range(3)]
    notes: list[str] = []
    chosen = initialization._auto(shapes, R6I_2XL, 300, 60, notes)
    # THEN auto does not take a way that waits ~10 min for FSR with 60 s to wait: that run
    # gives FSR up after 60 s and prewarms 3 TiB (hours), where the rate takes ~58 min
    if chosen.withFsr:
        wait = model.estimate(shapes, chosen.members, R6I_2XL, initialization.LATENCIES)
        assert wait.fsr_wait_s <= chosen.fsrTimeoutSeconds, (chosen, notes)


def test_a_plan_made_before_withfsr_existed_still_reads() -> None:
    # A run started before the update (its plan is in the execution's state) reaches the
    # updated functions on its next step: its Initialization has no withFsr (nor members).
    old = {"requested": "fsr", "used": "fsr", "fsrTimeoutSeconds": 3600}
    init = Initialization.model_validate(old)
    assert init.member(0) == "fsr"


def test_initialization_rate_is_taken_when_the_initialization_left_to_its_default_auto() -> None:
    # The default initialization is auto, which may use the rate: a request that leaves the
    # initialization to the default and names the rate to use is not refused.
    try:
        request = parse_restore_input({"array": "db1", "initializationRate": 200})
    except InvalidInputError as err:
        pytest.fail(f"refused: {err}")
    assert request.initializationRate == 200


@pytest.mark.parametrize(
    ("volume_type", "size_gib", "iops", "most_mibs"),
    [
        # st1: 40 MiB/s per TiB baseline, 250 MiB/s per TiB burst, 500 MiB/s per volume at most
        ("st1", 1024, None, 250.0),
        # gp2: 250 MiB/s only from 334 GiB; 128 MiB/s up to 170 GiB
        ("gp2", 100, None, 128.0),
        # io2/io1: throughput follows the provisioned IOPS (256 KiB I/O at most)
        ("io2", 100, 1000, 250.0),
    ],
)
def test_a_members_throughput_follows_its_size_and_iops(
    monkeypatch: pytest.MonkeyPatch,
    volume_type: str,
    size_gib: int,
    iops: int | None,
    most_mibs: float,
) -> None:
    monkeypatch.setattr(initialization.fsr, "states", lambda ids, zone: {})
    member = {
        "snapshotId": "snap-1",
        "sizeGib": size_gib,
        "volumeType": volume_type,
        "iops": iops,
        "throughput": None,
    }
    (shape,) = initialization._shapes([member], "us-east-1a", [])
    assert shape.throughput_mibs <= most_mibs, shape


@pytest.mark.parametrize(
    ("given", "configured", "field"),
    [
        ({"initializationRate": 200}, "prewarm", "initializationRate"),
        ({"fsrTimeoutSeconds": 600}, "rate", "fsrTimeoutSeconds"),
        ({"allowOptimizing": True}, "auto", "allowOptimizing"),
    ],
)
def test_an_option_the_configured_initialization_would_not_use_is_refused(
    given: dict[str, object], configured: str, field: str
) -> None:
    request = parse_restore_input({"array": "db1", **given})
    with pytest.raises(InvalidInputError) as refused:
        initialization._refuse_unused_options(request, configured)
    assert refused.value.field == field
    assert f'the configured initialization is "{configured}"' in str(refused.value)


def test_a_set_whose_fsr_state_cannot_be_read_is_weighed_as_having_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def denied(ids: object, zone: str) -> object:
        raise ClientError(
            {"Error": {"Code": "UnauthorizedOperation", "Message": "denied by an SCP"}},
            "DescribeFastSnapshotRestores",
        )

    monkeypatch.setattr(initialization.fsr, "states", denied)
    member = {"snapshotId": "snap-1", "sizeGib": 32, "volumeType": "gp3", "throughput": 1000}
    notes: list[str] = []
    (shape,) = initialization._shapes([member], "us-east-1a", notes)
    assert shape.fsr.state == "absent"
    assert notes == [
        "the FSR state of the set could not be read (UnauthorizedOperation); it was weighed "
        "as having none"
    ]
