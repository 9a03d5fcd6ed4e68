"""A local world's clock: discrete-event while the world is built, then emulated time follows
real time at a set speed while nothing runs, and stands still while something does."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from raidsnap_emulation.paced import PacedClock

START = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> Iterator[PacedClock]:
    paced = PacedClock(START)
    yield paced
    paced.close()


def _sleep_in_thread(clock: PacedClock, seconds: float) -> tuple[threading.Thread, list[float]]:
    took: list[float] = []

    def run() -> None:
        began = time.monotonic()
        try:
            clock.sleep(seconds)
            took.append(time.monotonic() - began)
        finally:
            clock.leave()

    thread = threading.Thread(target=run)
    clock.enlist(thread)
    thread.start()
    return thread, took


def test_before_pacing_a_sleep_jumps_to_its_wake_up(clock: PacedClock) -> None:
    thread, took = _sleep_in_thread(clock, 3600)
    thread.join(5)
    assert took and took[0] < 1.0
    assert (clock.now() - START).total_seconds() == 3600


def test_paced_time_flows_at_its_speed_while_nothing_runs(clock: PacedClock) -> None:
    clock.pace(100)
    time.sleep(0.5)
    flowed = (clock.now() - START).total_seconds()
    # half a real second at 100x: about 50 emulated seconds (the machine may be busy)
    assert 25 <= flowed <= 100


def test_a_paced_sleep_takes_its_emulated_time_divided_by_the_speed(clock: PacedClock) -> None:
    clock.pace(20)
    thread, took = _sleep_in_thread(clock, 10)  # half a real second
    thread.join(10)
    assert took and 0.4 <= took[0] <= 3.0
    assert (clock.now() - START).total_seconds() >= 10


def test_paced_time_stands_still_while_a_participant_runs(clock: PacedClock) -> None:
    clock.pace(1000)
    with clock.hold("a function"):
        before = clock.now()
        time.sleep(0.3)
        assert clock.now() == before


def test_a_paced_sleep_longer_than_the_stall_limit_ends_normally(clock: PacedClock) -> None:
    clock.pace(10)
    assert clock.stall_limit is None
    thread, took = _sleep_in_thread(clock, 3)
    thread.join(5)
    assert took


def test_sleepers_due_at_one_instant_wake_in_order(clock: PacedClock) -> None:
    clock.pace(50)
    woke: list[str] = []

    def sleeper(name: str, seconds: float) -> threading.Thread:
        def run() -> None:
            try:
                clock.sleep(seconds)
                woke.append(name)
            finally:
                clock.leave()

        thread = threading.Thread(target=run)
        clock.enlist(thread)
        thread.start()
        return thread

    threads = [sleeper("late", 20), sleeper("early", 5), sleeper("middle", 10)]
    for thread in threads:
        thread.join(10)
    assert woke == ["early", "middle", "late"]


def test_paused_time_stands_still_and_a_sleeper_waits_for_it(clock: PacedClock) -> None:
    clock.pause()
    clock.pace(100)
    thread, took = _sleep_in_thread(clock, 1)
    time.sleep(0.3)
    assert not took
    assert clock.now() == START
    assert clock.activity() == (0, 1)  # parked: nothing runs, one sleeps
    clock.pause(False)
    thread.join(5)
    assert took
