"""Emulated time that follows real time: the clock of a local world a person watches.

The discrete-event clock (clock.py) jumps to the next wake-up as soon as nothing in the
executions can run, so a restore of an hour of emulated time is over in a second of real time.
In a world that lives on between commands that leaves nothing to watch, and ages would stand
still between runs. Paced, emulated time runs at ``speed`` emulated seconds per real second
whenever nothing in the executions can run, and still stands still while something does (a
function, a state's own work), exactly as in the discrete-event clock: sleepers wake when time
reaches their wake-up, one at a time, in the same order. Until ``pace`` is called the clock
is discrete-event, so that a world can be built and seeded at full speed first.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta

from raidsnap_emulation.clock import VirtualClock

# How often (real seconds) time moves on while paced.
TICK_SECONDS = 0.02


class PacedClock(VirtualClock):
    def __init__(self, start: datetime | None = None) -> None:
        super().__init__(start)
        self.speed: float | None = None  # None: discrete-event, until pace()
        # Paused, emulated time stands still until resumed; sleepers wait for it.
        self.paused = False
        self._ticker: threading.Thread | None = None

    def pace(self, speed: float) -> None:
        """From now on, emulated time follows real time, ``speed`` times as fast."""
        if speed <= 0:
            raise ValueError("speed must be positive")
        with self._cond:
            self.speed = speed
            # A sleep lasts as long as its emulated time takes in real time: it never stalls,
            # since real time always moves.
            self.stall_limit = None
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._run, name="paced-clock", daemon=True)
            self._ticker.start()

    def pause(self, paused: bool = True) -> None:
        """Stop emulated time where it is (a person looks at a run mid-way), or let it run on."""
        with self._cond:
            self.paused = paused

    def activity(self) -> tuple[int, int]:
        """(participants that can run now, participants sleeping until a time), the caller
        aside: with none running and the clock stopped, every run stays where it is until time
        moves."""
        with self._cond:
            me = threading.current_thread()
            participants = [p for t, p in self._threads.items() if t is not me]
            return (
                sum(1 for p in participants if p.runnable()),
                sum(1 for p in participants if p.wake is not None),
            )

    def _reached(self, wake: datetime) -> bool:
        if self.speed is None:
            return super()._reached(wake)
        return wake <= self._now  # the ticker brings time there

    def _run(self) -> None:
        last = time.monotonic()
        while True:
            time.sleep(TICK_SECONDS)
            now = time.monotonic()
            with self._cond:
                if self._closed:
                    return
                self._flow(now - last)
            last = now

    def _flow(self, elapsed: float) -> None:
        """Move time on by ``elapsed`` real seconds' worth, up to the first wake-up due, when
        nothing can run. Under self._cond."""
        participants = list(self._threads.values())
        if self.speed is None or self.paused or any(p.runnable() for p in participants):
            return  # time stands still while anything runs at this instant
        target = self._now + timedelta(seconds=elapsed * self.speed)
        wakes = [p.wake for p in participants if p.wake is not None]
        if wakes:
            target = min(target, *wakes)
        if target > self._now:
            self._now = target
            self._changed()  # the scheduler releases the sleeper now due
