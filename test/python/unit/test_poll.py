"""models.Poll: how every loop of the workflows spends its budget."""

from __future__ import annotations

import itertools

from raidsnap.models import Poll, wait_toward_end


def test_each_wait_comes_off_the_budget_until_it_is_spent() -> None:
    poll = Poll.of({"waitSeconds": 5, "budgetSeconds": 12, "status": "pending"})
    assert poll == Poll(5, 12)
    assert poll.waited() == Poll(5, 7)
    assert not poll.waited().spent
    assert poll.waited().waited().waited().spent
    assert Poll(5, 5).waited().spent


def test_the_state_keeps_the_keys_the_wait_states_read() -> None:
    assert Poll(3, 600).as_dict() == {"waitSeconds": 3, "budgetSeconds": 600}


def _looks(predicted: int, ended: float) -> list[int]:
    """When a loop following ``predicted`` looks, until the first look at or after ``ended``."""
    looks = [wait_toward_end(predicted, 0)]
    while looks[-1] < ended:
        looks.append(looks[-1] + wait_toward_end(predicted, looks[-1]))
    return looks


def test_a_followed_prediction_is_looked_at_on_its_end_and_closely_after() -> None:
    # GIVEN a prewarm of 2 TiB members predicted to read for 8,389 s (2,048 GiB at 250 MiB/s)
    predicted = 8389
    looks = _looks(predicted, predicted + 40)
    # THEN the looks before the predicted end are at most 5 minutes apart, one falls on it,
    # and the next ones come every 15 s
    waits = [b - a for a, b in zip([0, *looks], looks, strict=False)]
    before = [w for t, w in zip(looks, waits, strict=True) if t <= predicted]
    assert max(before) <= 300 and len(before) == 28
    assert predicted in looks
    assert looks[-3:] == [predicted + 15, predicted + 30, predicted + 45]


def test_the_later_past_its_prediction_the_longer_between_looks_up_to_5_minutes() -> None:
    # GIVEN the same prediction, and a prewarm that reads for the 48 hours the document allows
    predicted, longest = 8389, 172800
    looks = _looks(predicted, longest)
    # THEN each wait past the predicted end is a quarter of the lateness (15 s to 5 minutes),
    # and the whole run looks 590 times (a look every 15 s would be 11,000)
    for before, after in itertools.pairwise(looks):
        if before >= predicted:
            late = before - predicted
            assert after - before == min(300, max(15, late // 4))
    assert len(looks) == 590
