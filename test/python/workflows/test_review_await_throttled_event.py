"""Review: EBS's event, throttled once, is lost, and the backup waits out AwaitSnapshots' hour.

The event reaches the check function as an asynchronous invocation; a function error there is
retried twice, about a minute and then two minutes later (AWS Lambda developer guide,
"Asynchronous invocation": "Lambda retries the function two more times", "If the function
returns an error ... waits one minute before the second attempt, and two minutes between the
second and third"). The EventBridge target's retryAttempts (8) applies to delivering the event to
Lambda, not to the function's errors (EventBridge user guide, "Event retry policy and using
dead-letter queues"). So when EC2 throttles DescribeSnapshots for a few minutes at the moment the
snapshots complete (a fleet whose backups all end together: "Request throttling for the Amazon
EC2 API", EC2 developer guide), every try of the event fails (ThrottledError) and no one answers
the Task: the run waits until TimeoutSeconds (3600) sends it to the polling loop, where the
same throttling would have cost a few retries of 5 s to 300 s (LAMBDA_RETRY). The backup's
retention, its fastRestore policy and its copies all start up to an hour late.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from raidsnap_emulation.double.limits import RateLimits
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import make_array


class _FleetAtTheEnd(RateLimits):
    """The rest of the account takes every DescribeSnapshots token for ``minutes`` from the
    moment the run's snapshots complete (``seconds`` after its CreateSnapshots call)."""

    def __init__(self, emu: Emulation, seconds: int, minutes: int) -> None:
        super().__init__(RateLimits.documented().shapes)
        self.emu, self.seconds, self.minutes = emu, seconds, minutes

    def window(self) -> tuple[datetime, datetime] | None:
        made = [c.time for c in self.emu.double.calls if c.operation == "CreateSnapshots"]
        if not made:
            return None
        begin = min(made) + timedelta(seconds=self.seconds)
        return begin, begin + timedelta(minutes=self.minutes)

    def allow(
        self, service: str, operation: str, params: Mapping[str, object], now: datetime
    ) -> bool:
        window = self.window()
        if operation == "DescribeSnapshots" and window and window[0] <= now < window[1]:
            return False
        return super().allow(service, operation, params, now)


def test_review_await_throttled_event_does_not_leave_the_run_waiting_an_hour(
    emu: Emulation,
) -> None:
    # GIVEN a backup whose snapshots take 10 minutes, and the rest of the account holding
    # DescribeSnapshots' bucket empty for the 5 minutes after they complete
    emu.double.snapshot_seconds = 600
    make_array(emu.hosts, "db1", 3)
    fleet = _FleetAtTheEnd(emu, seconds=600, minutes=5)
    emu.double.rate_limits = fleet
    emu.clock.task_timeouts = True  # a Task's TimeoutSeconds runs out as on AWS

    # WHEN it runs
    run = emu.run("backup", {"array": "db1"})

    # THEN it goes on soon after the throttling ends, not once AwaitSnapshots' hour is over
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    window = fleet.window()
    assert window is not None and run.ended_at is not None
    late = (run.ended_at - window[0]).total_seconds()
    assert late < 15 * 60, (
        f"the backup ended {late / 60:.0f} min after its snapshots completed "
        f"(states: {run.states_entered[-6:]})"
    )
