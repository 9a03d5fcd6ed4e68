"""The restore-time model (plan.restore_time): each strategy's predicted time to mounted and to
full performance from AWS's published figures, and the choice `initialization: auto` makes."""

from __future__ import annotations

import pytest

from raidsnap.plan.restore_time import (
    FIGURES,
    Bandwidth,
    FsrNow,
    Latencies,
    MemberShape,
    choose,
    credits_now,
    describe,
    duration,
    estimate,
    explain,
    fsr_ready_seconds,
    read_seconds,
)

LAT = Latencies()
# DescribeInstanceTypes: m7i.2xlarge 312.5 MB/s baseline, 1,250 MB/s maximum; c8i.96xlarge
# 10,000 MB/s both.
SMALL = Bandwidth.from_mb(312.5, 1250.0, "m7i.2xlarge")
LARGE = Bandwidth.from_mb(10000.0, 10000.0, "c8i.96xlarge")


def gp3(n: int, size_gib: int, fsr: FsrNow | None = None) -> list[MemberShape]:
    return [MemberShape(size_gib, 1000.0, fsr or FsrNow()) for _ in range(n)]


def test_every_figure_names_its_source():
    assert FIGURES
    for figure in FIGURES:
        assert figure.value and figure.source, figure


def test_fsr_enabled_now_waits_enabling_optimizing_and_the_first_credit():
    # 1 TiB: 60 s enabling, 60 min optimizing, then 1 credit an hour (1024 / 1024).
    assert fsr_ready_seconds(MemberShape(1024, 1000.0)) == pytest.approx(60 + 3600 + 3600)
    # 2 TiB: 120 min optimizing, a credit every 2 h.
    assert fsr_ready_seconds(MemberShape(2048, 1000.0)) == pytest.approx(60 + 7200 + 7200)
    # 100 GiB: the bucket fills at its cap of 10 an hour.
    assert fsr_ready_seconds(MemberShape(100, 1000.0)) == pytest.approx(60 + 351.5625 + 360)


def test_fsr_already_enabled_with_a_credit_is_ready_now():
    enabled = FsrNow("enabled", in_state_seconds=4 * 3600)
    assert fsr_ready_seconds(MemberShape(1024, 1000.0, enabled)) == 0
    # Enabled 20 min ago: the 1 TiB bucket has a third of a credit.
    young = FsrNow("enabled", in_state_seconds=1200)
    assert credits_now(1024, 1200) == pytest.approx(1 / 3)
    assert fsr_ready_seconds(MemberShape(1024, 1000.0, young)) == pytest.approx(2400)


def test_prewarm_shares_the_instance_bandwidth_and_drops_to_baseline_after_its_burst():
    # 3 x 1 TiB on 10,000 MB/s: each member at its own 1,000 MiB/s.
    assert read_seconds(gp3(3, 1024), LARGE) == pytest.approx(1024 * 1024 / 1000)
    # On m7i.2xlarge: 1,192 MiB/s for 30 min, then 298 MiB/s.
    fast, slow = 1250 * 1e6 / 2**20, 312.5 * 1e6 / 2**20
    left = 3 * 1024 * 1024 - fast * 1800
    assert read_seconds(gp3(3, 1024), SMALL) == pytest.approx(1800 + left / slow)


def test_rate_starts_at_creation_and_ignores_the_instance():
    e = estimate(gp3(16, 2048), ["rate"] * 16, SMALL, LAT, 300)
    assert e.full_s == pytest.approx(LAT.create_s + 2048 * 1024 / 300)
    assert e.mounted_s == pytest.approx(LAT.mounted_s)


@pytest.mark.parametrize(
    ("shape", "bw", "chosen"),
    [
        (gp3(3, 1024), SMALL, "rate"),  # prewarm would take 86 min, rate 58
        (gp3(3, 1024), LARGE, "prewarm"),  # 17 min of reads beat 58 min of rate
        (gp3(16, 2048), SMALL, "rate"),  # prewarm ~30 h at the baseline
        (gp3(8, 500), LARGE, "prewarm"),
    ],
)
def test_auto_chooses_the_quickest_to_full_performance(shape, bw, chosen):
    best, others = choose(shape, bw, LAT)
    assert best.name == chosen
    assert all(best.sort_key() <= o.sort_key() for o in others)


def test_auto_never_waits_for_fsr_it_would_have_to_enable():
    best, others = choose(gp3(3, 1024), SMALL, LAT)
    fsr = next(e for e in others if e.name == "fsr")
    assert fsr.full_s == pytest.approx(60 + 7200 + LAT.mounted_s)
    assert best.full_s is not None and best.full_s < fsr.full_s


def test_auto_uses_fsr_kept_enabled_and_mixes_where_only_some_members_have_it():
    on = FsrNow("enabled", in_state_seconds=86400)
    best, _ = choose(gp3(3, 1024, on), SMALL, LAT)
    assert best.members == ("fsr", "fsr", "fsr")
    assert best.full_s == pytest.approx(LAT.mounted_s)
    mixed = [*gp3(2, 1024, on), *gp3(1, 1024)]
    best, _ = choose(mixed, LARGE, LAT)
    assert best.members == ("fsr", "fsr", "prewarm")


def test_a_mix_beats_every_whole_set_strategy_when_the_instance_is_the_bottleneck():
    # 16 x 2 TiB on 10,000 MB/s: prewarm of all at 9,537 MiB/s ~ 1 h; rate ~1 h 57 min; some
    # members at the rate and the rest read by the instance end sooner than either.
    best, others = choose(gp3(16, 2048), LARGE, LAT)
    uniform = [e for e in others if len(set(e.members)) == 1]
    assert best.full_s is not None
    assert all(e.full_s is None or best.full_s <= e.full_s for e in uniform)


def test_quota_leaves_out_ways_that_would_enable_fsr_beyond_it():
    tiny = [MemberShape(1, 1000.0) for _ in range(3)]
    best, _ = choose(tiny, LARGE, LAT, allowed=("fsr",), fsr_room=3)
    assert best.name == "fsr"
    with pytest.raises(IndexError):
        choose(tiny, LARGE, LAT, allowed=("fsr",), fsr_room=2)


def test_the_explanation_names_the_choice_the_instance_and_the_losers():
    best, others = choose(gp3(3, 1024), SMALL, LAT)
    text = "\n".join(explain(best, others, SMALL))
    assert "auto chose rate at 300 MiB/s on m7i.2xlarge" in text
    assert "full performance in about 58 min" in text
    assert "prewarm" in text and "fsr" in text
    assert describe(best) == "rate at 300 MiB/s"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(40, "40 s"), (384, "6 min"), (7080, "1 h 58 min"), (None, "no bound")],
)
def test_durations_read_as_a_person_says_them(seconds, text):
    assert duration(seconds).startswith(text)
