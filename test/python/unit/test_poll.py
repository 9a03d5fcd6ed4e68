"""models.Poll: how every loop of the workflows spends its budget."""

from __future__ import annotations

from raidsnap.models import Poll


def test_each_wait_comes_off_the_budget_until_it_is_spent() -> None:
    poll = Poll.of({"waitSeconds": 5, "budgetSeconds": 12, "status": "pending"})
    assert poll == Poll(5, 12)
    assert poll.waited() == Poll(5, 7)
    assert not poll.waited().spent
    assert poll.waited().waited().waited().spent
    assert Poll(5, 5).waited().spent


def test_the_state_keeps_the_keys_the_wait_states_read() -> None:
    assert Poll(3, 600).as_dict() == {"waitSeconds": 3, "budgetSeconds": 600}
