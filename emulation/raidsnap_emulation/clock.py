"""Virtual time shared by the double and the patched Step Functions executor.

Wait states and Retry back-offs advance this clock instead of sleeping, and the double derives
snapshot progress, FSR states and command durations from it.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta


class VirtualClock:
    def __init__(self, start: datetime | None = None) -> None:
        self._lock = threading.Lock()
        # Start at the real time, so that what Step Functions stamps with real time (execution
        # start, hence set ids) and what the double stamps with virtual time begin together.
        self._now = start or datetime.now(UTC).replace(microsecond=0)

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("time only moves forward")
        with self._lock:
            self._now += timedelta(seconds=seconds)

    def seconds_since(self, then: datetime) -> float:
        return (self.now() - then).total_seconds()
