"""Virtual time shared by the double and the patched Step Functions executor: a discrete-event
clock.

Every thread that runs part of an execution takes part in the clock (executor_time.py enlists
moto's executor threads as they are created). A participant that waits on the clock (a Wait
state, a Retry back-off, a function's own pause) registers when it wants to wake and blocks; one
that waits on another participant (a state for the thread running its task, a parent for its
nested execution, an invocation for the invoke lock) says what it waits for. Only when no
participant can run does time move: to the earliest wake-up, releasing that one sleeper. So
executions that run at once wait at once, as they do on AWS, instead of one after the other.

A thread outside the executions (a test, a script) moves time at once with ``advance``; while it
sleeps or runs a function (``hold``) it takes part too. The double derives snapshot progress, FSR
states and command durations from ``now``.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

# How often (real seconds) a blocked participant looks again at what no one tells it about: a
# stopped execution, a nested execution's status.
POLL_SECONDS = 0.05
# A sleeper that sees no progress for this long (real seconds) gives up with a description of
# every participant rather than hang its caller.
STALL_LIMIT_SECONDS = 120.0


class ClockStalledError(RuntimeError):
    """Nothing could move the clock on: the message names every participant and what it waits
    for."""


@dataclass
class _Participant:
    label: str  # the execution (or "outside") it works for
    group: int  # orders sleepers due at one instant: the execution started first goes first
    seq: int  # then the thread created first
    thread: str
    wake: datetime | None = None  # sleeping until then
    since: datetime | None = None  # when that sleep began
    waiting: Callable[[], bool] | None = None  # blocked while this answers True
    what: str = ""
    # A sleeper that another participant may wake before its time (an Event set): it can run
    # again as soon as this answers True. Such a sleep is a timeout (a Task's TimeoutSeconds).
    until: Callable[[], bool] | None = None
    # Waiting for the world outside the executions (a test holding a step), not for time.
    outside: bool = False
    # A sleeper for this execution (its name) only: woken, without time moving, once it ended.
    ends_with: str | None = None

    def runnable(self) -> bool:
        awake = self.wake is None or (self.until is not None and self.until())
        return awake and (self.waiting is None or not self.waiting())


class VirtualClock:
    def __init__(self, start: datetime | None = None) -> None:
        self._cond = threading.Condition()
        # Start at the real time, so that what Step Functions stamps with real time (execution
        # start, hence set ids) and what the double stamps with virtual time begin together.
        self._now = start or datetime.now(UTC).replace(microsecond=0)
        self._start = self._now
        self._threads: dict[threading.Thread, _Participant] = {}
        self._seq = itertools.count(1)
        self._groups = itertools.count(1)
        self._closed = False
        self._stalled_since: float | None = None
        # Whether a Task's TimeoutSeconds runs out on this clock (executor_time.py). Off unless
        # a test turns it on: the emulation delivers Step Functions' end events only when a
        # test says so, and meanwhile, with nothing else to run, time would jump to a waiting
        # Task's timeout (a recovery waiting days for the restore whose end the test is about
        # to deliver).
        self.task_timeouts = False
        # Real seconds a sleeper may see no progress before it gives up (None: never).
        self.stall_limit: float | None = STALL_LIMIT_SECONDS
        # When each execution ended, on this clock, by its ARN (Step Functions' own stopDate
        # is stamped with real time here).
        self.ended: dict[str, datetime] = {}

    # -- reading and moving time from outside

    def now(self) -> datetime:
        with self._cond:
            return self._now

    def seconds_since(self, then: datetime) -> float:
        return (self.now() - then).total_seconds()

    def advance(self, seconds: float) -> None:
        """Move time on at once, as the world outside the executions (a test, a script) does;
        sleepers now due wake as soon as nothing else runs."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        with self._cond:
            self._now += timedelta(seconds=seconds)
            self._changed()

    # -- participants

    def enlist(self, thread: threading.Thread, label: str | None = None, new: bool = False) -> None:
        """``thread`` takes part from now (before it starts: it counts as running until it
        blocks), for the execution its creator works for, or for a ``new`` one."""
        with self._cond:
            creator = self._threads.get(threading.current_thread())
            group = next(self._groups) if new or creator is None else creator.group
            name = label or (creator.label if creator is not None else thread.name)
            self._threads[thread] = _Participant(name, group, next(self._seq), thread.name)
            self._changed()

    def leave(self, thread: threading.Thread | None = None) -> None:
        with self._cond:
            self._threads.pop(thread or threading.current_thread(), None)
            self._changed()

    def label_of(self, thread: threading.Thread) -> str | None:
        """The execution ``thread`` works for (its name), if it takes part."""
        with self._cond:
            participant = self._threads.get(thread)
            return participant.label if participant is not None else None

    def has_ended(self, name: str) -> bool:
        """Whether the execution of this name has ended (it may be read under the lock)."""
        return any(arn.rsplit(":", 1)[-1] == name for arn in list(self.ended))

    def takes_part(self, thread: threading.Thread) -> bool:
        """Whether ``thread`` is enlisted: a thread leaves as its last act, before is_alive()
        turns False, so this is what a thread joining it waits on."""
        with self._cond:
            return thread in self._threads

    @contextlib.contextmanager
    def hold(self, label: str = "outside the executions") -> Iterator[None]:
        """Time stands still while the block runs: the calling thread takes part, running."""
        me = threading.current_thread()
        with self._cond:
            joined = me not in self._threads
            if joined:
                self._threads[me] = _Participant(label, 0, next(self._seq), me.name)
                self._changed()
        try:
            yield
        finally:
            if joined:
                self.leave(me)

    # -- blocking

    def sleep(
        self,
        seconds: float,
        interrupted: Callable[[], bool] | None = None,
        until: Callable[[], bool] | None = None,
        ends_with: str | None = None,
    ) -> None:
        """Block until the clock reaches now + ``seconds`` (or ``interrupted()``, or
        ``until()``). ``until`` is what another participant sets (it is read under the clock's
        lock, and may only read): once it answers True the sleeper counts as running, so time
        cannot move past the instant it was woken. Such a sleeper waits for others as much as
        for time (a Task's timeout while its task runs), so it is never given up on as stalled:
        its wake-up is due, and the others' work may take long in real time. ``ends_with``: the
        sleep is for that execution (its name) only, and ends, time standing still, when it
        ended (something it would have seen, such as EBS's event of its snapshots, comes to no
        one then)."""
        if seconds <= 0:
            return
        with self.hold(), self._cond:
            me = self._threads[threading.current_thread()]
            me.wake, me.since = self._now + timedelta(seconds=seconds), self._now
            me.until, me.ends_with = until, ends_with
            self._changed()
            limit = self.stall_limit
            deadline = None if limit is None else time.monotonic() + limit
            try:
                while me.wake is not None:  # _schedule releases it
                    stalled = until is None and deadline is not None and time.monotonic() > deadline
                    woken = until is not None and until()
                    if (
                        self._closed
                        or stalled
                        or woken
                        or (interrupted is not None and interrupted())
                    ):
                        me.wake = None
                        self._changed()
                        if stalled and not self._closed:
                            raise ClockStalledError(self._describe())
                        return
                    self._cond.wait(POLL_SECONDS)
            finally:
                me.until, me.ends_with = None, None

    @contextlib.contextmanager
    def waiting(
        self, blocked: Callable[[], bool], what: str, outside: bool = False
    ) -> Iterator[None]:
        """Inside the block the calling thread waits for another participant (``outside``: for
        the world outside the executions, a test): it counts as blocked while ``blocked()``
        answers True. ``blocked`` is called under the clock's lock: it may only read."""
        me = self._threads.get(threading.current_thread())
        if me is None:  # not taking part: nothing to account for
            yield
            return
        with self._cond:
            me.waiting, me.what, me.outside = blocked, what, outside
            self._changed()
        try:
            yield
        finally:
            with self._cond:
                me.waiting, me.what, me.outside = None, "", False
                self._changed()

    def wait_until(self, done: Callable[[], bool], what: str) -> None:
        """Block, counted as waiting for ``what``, until ``done()``: looked at whenever a
        participant changes, and every POLL_SECONDS for what changes outside them."""
        with self.waiting(lambda: not done(), what), self._cond:
            while not self._closed and not done():
                self._cond.wait(POLL_SECONDS)

    @contextlib.contextmanager
    def locked(self, lock: OwnedLock, what: str) -> Iterator[None]:
        """Hold ``lock`` inside the block; while another thread holds it, the caller counts as
        waiting for that thread (which, if it sleeps on the clock, lets time move on)."""
        me = threading.current_thread()
        with self.waiting(lambda: lock.holder not in (None, me), what):
            lock.acquire()
        try:
            yield
        finally:
            lock.release()

    # -- the scheduler (under self._cond)

    def _changed(self) -> None:
        self._stalled_since = None
        self._schedule()
        self._cond.notify_all()

    def _schedule(self) -> None:
        if self._closed:
            return
        sleepers = []
        held = False
        for participant in self._threads.values():
            if participant.ends_with and self.has_ended(participant.ends_with):
                participant.wake = None  # its execution ended: woken now, time stands still
            if participant.runnable():
                return  # time stands still while anything can still run at this instant
            if participant.wake is not None:
                sleepers.append(participant)
            held = held or (participant.outside and participant.waiting is not None)
        if held:
            # While a test holds a step, the executions' waits go on, but no timeout runs out
            # (and time does not pass one): holding takes no time on AWS, and a Task's timeout
            # is for what never ends there.
            timeouts = [p.wake for p in sleepers if p.until is not None and p.wake is not None]
            sleepers = [
                p
                for p in sleepers
                if p.until is None
                and (not timeouts or (p.wake is not None and p.wake < min(timeouts)))
            ]
        if not sleepers:
            if self._threads:
                self._stalled_since = time.monotonic()
            return
        # One sleeper at a time, in an order that does not depend on which thread the operating
        # system ran first: what it does at this instant is done before the next one wakes.
        first = min(sleepers, key=lambda p: (p.wake, p.since, p.group, p.seq))
        assert first.wake is not None
        if self._reached(first.wake):
            first.wake = None

    def _reached(self, wake: datetime) -> bool:
        """Whether time may be at ``wake`` now that nothing can run: here at once (time jumps
        to the next wake-up). Under self._cond."""
        self._now = max(self._now, wake)
        return True

    # -- ending and diagnostics

    def close(self) -> None:
        """From now on sleeps return at once: what is left of the executions can end."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def await_end(self, execution_arn: str, seconds: float) -> bool:
        """For a thread outside the executions (not a participant): block for at most
        ``seconds`` of real time until the execution with this ARN has ended on this clock;
        whether it had ended already. Its thread records the end before it leaves (which
        notifies), so no end is missed between a look and this wait."""
        with self._cond:
            if execution_arn in self.ended:
                return True
            self._cond.wait_for(lambda: execution_arn in self.ended or self._closed, seconds)
            return False

    def stalled_for(self) -> float:
        """Real seconds for which every participant has been blocked with no wake-up due (0 if
        something can run or sleeps): only the world outside can change that."""
        with self._cond:
            participants = self._threads.values()
            if any(p.runnable() or p.wake is not None for p in participants):
                self._stalled_since = None  # the world outside set something free meanwhile
            if self._stalled_since is None:
                return 0.0
            return time.monotonic() - self._stalled_since

    def describe(self) -> str:
        with self._cond:
            return self._describe()

    def _describe(self) -> str:
        def offset(when: datetime) -> str:
            return f"+{(when - self._start).total_seconds():g} s"

        lines = [f"virtual clock at {offset(self._now)}; participants:"]
        for p in self._threads.values():
            if p.wake is not None:
                state = f"sleeping until {offset(p.wake)}"
            elif p.waiting is not None:
                state = f"waiting for {p.what}" + ("" if p.waiting() else " (now free to run)")
            else:
                state = "running"
            lines.append(f"  {p.label} [{p.thread}]: {state}")
        if not self._threads:
            lines.append("  none")
        return "\n".join(lines)


class OwnedLock:
    """A lock that knows its holder, so that a thread waiting for it counts as blocked only while
    another thread holds it (VirtualClock.locked)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.holder: threading.Thread | None = None

    def acquire(self) -> None:
        self._lock.acquire()
        self.holder = threading.current_thread()

    def release(self) -> None:
        self.holder = None
        self._lock.release()

    def __enter__(self) -> OwnedLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
