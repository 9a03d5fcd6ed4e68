"""A thousand arrays on one deployment: scheduled backups from one cron expression, and a
thousand restores at once after a Region-wide failure, against the documented limits.

Not a test: a measurement to read (`make bench` runs it).

What is real and what is modelled. One backup and one restore of an array of 3, 8 and 16
members run for real on the emulation (the synthesized state machines, the functions, the EC2
double with EC2's and Step Functions' documented token buckets on: raidsnap_emulation.double
.limits). Each run gives a profile: every AWS call its functions and state machine made, by
action, at its offset on the virtual clock, its state transitions and Lambda invocations. A
thousand real executions do not fit the bench's ten minutes on two cores (one backup and one
restore take about 10 s of wall time here, and moto's executor runs each on a thread of its
own), so the fleet is a discrete-event model on a virtual clock that replays those profiles,
one per array, through the same token buckets:
- EC2 request buckets, one per API action sized by its category, and Step Functions'
  StartExecution bucket (limits.py names the page and the figures), and its state-transition
  bucket (5,000, 1,500/s in us-east-1):
  an execution short of transition tokens waits, as Step Functions delays a throttled one;
- a throttled call is retried as raidsnap retries it: botocore's standard mode (5 attempts,
  backoff random x min(20 s, 2^(attempt-1))), then the Task's Retry on ThrottledError as the
  synthesized restore workflow states it (read from cdk.out: lib/constructs/workflow.ts,
  LAMBDA_RETRY; full jitter); a call that exhausts both fails its run, and the table names it;
- the run's later calls move by whatever its earlier ones waited (a run is sequential);
- Lambda concurrency (1,000 per Region by default, Lambda quotas) is checked, not enforced:
  each invocation is assumed to last INVOCATION_SECONDS, and the peak is printed;
- EBS: concurrent snapshots per gp3 volume (5), gp3 storage per Region (50 TiB) and FSR
  (5 snapshots per Region) are the defaults in "Amazon EBS endpoints and quotas", AWS General
  Reference (https://docs.aws.amazon.com/general/latest/gr/ebs-service.html), as quoted by the
  copies of that page searchable offline; the bench checks the fleet against them.
What the model leaves out: SSM's and DynamoDB's own limits (raidsnap's calls to them are few
per run and retried the same way), Lambda cold starts, and calls' own latency.
"""

from __future__ import annotations

import contextlib
import heapq
import io
import json
import logging
import math
import random
import sys
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal

from raidsnap.plan import run_cost
from raidsnap_emulation.double.limits import RateLimits, bucket_of, category_of
from raidsnap_emulation.harness import Emulation, synthesize
from raidsnap_emulation.template import Template
from raidsnap_emulation.world import launch_instance, make_array, name_in_config, terminate

ARRAYS = 1000
MIX = {3: ARRAYS - 50, 8: 40, 16: 10}  # members: arrays ("a few with 8 and 16")
MEMBER_GIB = 32
SDK_ATTEMPTS = 5
INVOCATION_SECONDS = 0.5
LAMBDA_CONCURRENCY = 1000
GP3_TIB_QUOTA = 50
FSR_QUOTA = 5
SNAPSHOTS_PER_VOLUME = 5
BACKUP_EVERY_HOURS = 4
SEED = 25


@dataclass
class Profile:
    workflow: str
    members: int
    calls: list[tuple[float, str, str, dict[str, object]]]
    transitions: int
    invocations: int
    seconds: float
    initialization: str = ""

    def by_action(self) -> Counter[str]:
        return Counter(f"{s}:{op}" for _, s, op, _ in self.calls if s not in ("lambda",))


def _measure(emu: Emulation, workflow: str, members: int, payload: dict[str, object]) -> Profile:
    start, mark = emu.clock.now(), len(emu.double.calls)
    run = emu.run(workflow, payload)
    if run.status != "SUCCEEDED":
        raise SystemExit(f"{workflow} of {members} members: {run.error}: {run.cause}")
    calls = [
        ((c.time - start).total_seconds(), c.service, c.operation, c.params)
        for c in emu.double.calls[mark:]
        if c.actor is not None and c.applied
    ]
    invocations = sum(1 for e in run.events if e["type"] == "LambdaFunctionScheduled")
    end = run.ended_at or emu.clock.now()
    used = str((run.output or {}).get("initialization", ""))
    return Profile(
        workflow, members, calls, run.transitions, invocations, (end - start).total_seconds(), used
    )


def profiles(members: int) -> tuple[Profile, Profile]:
    """A real backup, then a real restore onto a replacement instance (the array's instance is
    lost: a recovery's restore), with the documented rate limits on."""
    with contextlib.redirect_stdout(io.StringIO()), Emulation() as emu:
        emu.double.rate_limits = RateLimits.documented()
        fx = make_array(emu.hosts, "db1", members, size_gib=MEMBER_GIB)
        backup = _measure(emu, "backup", members, {"array": "db1"})
        terminate(fx.instance_id)
        target = launch_instance("db1-new", fx.availability_zone, tag_array=False)
        name_in_config(emu, "db1", target)
        restore = _measure(emu, "restore", members, {"array": "db1", "targetInstanceId": target})
        return backup, restore


# ------------------------------------------------------------------------------ the model


@dataclass(frozen=True)
class TaskRetry:
    interval: float
    attempts: int
    backoff: float
    max_delay: float

    def wait(self, attempt: int, rng: random.Random) -> float:
        """Full jitter: random between 0 and the attempt's bound."""
        bound = min(self.max_delay, self.interval * self.backoff ** (attempt - 1))
        return rng.random() * bound


# What LAMBDA_RETRY held before the fleet measurement: 12 attempts, at most 120 s apart.
FORMER_RETRY = TaskRetry(5, 12, 2, 120)


def task_retry() -> TaskRetry:
    """The restore's Retry on ThrottledError, from the synthesized template."""
    for _, definition in Template(synthesize()).state_machines().values():
        for state in json.loads(definition)["States"].values():
            for r in state.get("Retry", []):
                if r["ErrorEquals"] == ["ThrottledError"]:
                    assert r.get("JitterStrategy") == "FULL", r
                    return TaskRetry(
                        float(r["IntervalSeconds"]),
                        int(r["MaxAttempts"]),
                        float(r["BackoffRate"]),
                        float(r.get("MaxDelaySeconds", 1e9)),
                    )
    raise SystemExit("no Retry on ThrottledError in the synthesized workflows")


@dataclass
class Bucket:
    size: float
    rate: float
    tokens: float
    at: float = 0.0
    dry_at: float | None = None

    def refill(self, now: float) -> None:
        self.tokens = min(self.size, self.tokens + max(0.0, now - self.at) * self.rate)
        self.at = max(self.at, now)

    def take(self, now: float, n: float = 1.0) -> float:
        """Take n tokens at ``now``; returns how long the taker must wait for them (0: none)."""
        self.refill(now)
        if self.tokens >= n:
            self.tokens -= n
            return 0.0
        if self.dry_at is None:
            self.dry_at = now
        return (n - self.tokens) / self.rate


@dataclass
class Outcome:
    finish: list[float] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)
    failed: int = 0
    exhausted: Counter[str] = field(default_factory=Counter)
    throttled: Counter[str] = field(default_factory=Counter)
    past_sdk: int = 0
    transition_wait: float = 0.0
    buckets: dict[str, Bucket] = field(default_factory=dict)
    invocation_times: list[float] = field(default_factory=list)


@dataclass(order=True)
class _Step:
    t: float
    seq: int
    run: int = field(compare=False)
    index: int = field(compare=False)
    sdk: int = field(compare=False, default=1)
    task: int = field(compare=False, default=0)
    shift: float = field(compare=False, default=0.0)


def simulate(
    runs: list[Profile], window_seconds: float, rng: random.Random, retry: TaskRetry
) -> Outcome:
    limits = RateLimits.documented()
    out = Outcome()
    buckets: dict[str, Bucket] = {}

    def bucket(service: str, name: str, category: str | None = None) -> Bucket:
        # One bucket per API action, sized by its category (limits.py)
        size, rate = limits.shape(service, category or name)
        return buckets.setdefault(f"{service}:{name}", Bucket(size, rate, size))

    heap: list[_Step] = []
    seq = 0
    starter = bucket("stepfunctions", "StartExecution")
    for i, _ in enumerate(runs):
        fire = rng.uniform(0, window_seconds) if window_seconds else 0.0
        start = fire + starter.take(fire)
        out.starts.append(start)
        heapq.heappush(heap, _Step(start, seq, i, 0, shift=start))
        seq += 1
    out.finish = [0.0] * len(runs)
    transitions = bucket("stepfunctions", "StateTransition")
    while heap:
        step = heapq.heappop(heap)
        p = runs[step.run]
        if step.index >= len(p.calls):
            out.finish[step.run] = step.t
            continue
        _, service, op, params = p.calls[step.index]
        name = bucket_of(service, op, params)
        category = category_of(service, op, params)
        wait = 0.0
        if name is not None and category is not None:
            b = bucket(service, name, category)
            if b.take(step.t) > 0:
                out.throttled[op] += 1
                step.sdk += 1
                if step.sdk <= SDK_ATTEMPTS:
                    wait = rng.random() * min(20.0, 2.0 ** (step.sdk - 2))
                else:
                    out.past_sdk += 1
                    step.task += 1
                    step.sdk = 1
                    if step.task > retry.attempts:
                        out.failed += 1
                        out.exhausted[op] += 1
                        out.finish[step.run] = float("nan")
                        continue
                    wait = retry.wait(step.task, rng)
                step.t += wait
                step.shift += wait
                step.seq, seq = seq, seq + 1
                heapq.heappush(heap, step)
                continue
        # The call went through: this run's transitions, spread over its calls.
        delay = transitions.take(step.t, p.transitions / max(1, len(p.calls)))
        out.transition_wait += delay
        if service == "lambda":
            out.invocation_times.append(step.t)
        nxt = step.index + 1
        shift = step.shift + delay
        at = (p.calls[nxt][0] + shift) if nxt < len(p.calls) else (p.seconds + shift)
        heapq.heappush(heap, _Step(max(at, step.t), seq, step.run, nxt, shift=shift))
        seq += 1
    out.buckets = buckets
    return out


def peak_concurrency(times: list[float]) -> int:
    edges = sorted([(t, 1) for t in times] + [(t + INVOCATION_SECONDS, -1) for t in times])
    level = peak = 0
    for _, d in edges:
        level += d
        peak = max(peak, level)
    return peak


# ------------------------------------------------------------------------------ the report


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def fleet(measured: dict[int, Profile]) -> list[Profile]:
    return [measured[m] for m, n in MIX.items() for _ in range(n)]


def print_calls(title: str, measured: dict[int, Profile]) -> None:
    print(f"\n{title}: AWS calls per run by action (measured on the emulation)")
    actions = sorted(set().union(*(p.by_action() for p in measured.values())))
    print(f"{'action':<44}" + "".join(f"{f'N={m}':>8}" for m in measured))
    for a in actions:
        print(f"{a:<44}" + "".join(f"{measured[m].by_action()[a]:>8}" for m in measured))
    for label, attr in (
        ("state transitions", "transitions"),
        ("Lambda invocations", "invocations"),
    ):
        print(f"{label:<44}" + "".join(f"{getattr(measured[m], attr):>8}" for m in measured))
    print(
        f"{'virtual duration, s':<44}" + "".join(f"{measured[m].seconds:>8.0f}" for m in measured)
    )
    if any(p.initialization for p in measured.values()):
        print(
            f"{'initialization chosen (auto)':<44}"
            + "".join(f"{measured[m].initialization:>8}" for m in measured)
        )


def print_outcome(title: str, runs: list[Profile], out: Outcome) -> None:
    done = [f for f in out.finish if not math.isnan(f)]
    late = [f - s for f, s in zip(out.finish, out.starts, strict=True) if not math.isnan(f)]
    print(f"\n{title}")
    print(f"  completed              {len(done)} of {len(runs)}; failed {out.failed}")
    print(
        f"  start times            first {out.starts and min(out.starts):.1f} s, "
        f"median {pct(out.starts, 0.5):.1f} s, last {max(out.starts):.1f} s"
    )
    print(
        f"  run durations          median {minutes(pct(late, 0.5))}, "
        f"p99 {minutes(pct(late, 0.99))}, longest {minutes(max(late))}"
    )
    print(f"  all done after         {minutes(max(done))}")
    print(
        f"  throttled calls        {sum(out.throttled.values())} (retried by the SDK; "
        f"{out.past_sdk} went past the SDK's 5 attempts to the Task's Retry; "
        f"{out.failed} exhausted both"
        + (
            f": {', '.join(f'{op} {n}' for op, n in out.exhausted.most_common())})"
            if out.failed
            else ")"
        )
    )
    for op, n in out.throttled.most_common(6):
        print(f"    {op:<36}{n:>8}")
    print(f"  state-transition wait  {out.transition_wait:.1f} s in all")
    peak = peak_concurrency(out.invocation_times)
    print(
        f"  Lambda concurrency     peak {peak} of {LAMBDA_CONCURRENCY} "
        f"({INVOCATION_SECONDS} s each)"
    )
    dry = sorted((b.dry_at, name) for name, b in out.buckets.items() if b.dry_at is not None)
    if dry:
        print("  buckets that ran dry   " + ", ".join(f"{n} at {t:.1f} s" for t, n in dry))
        print(f"  binds first            {dry[0][1]}")
    else:
        print("  buckets that ran dry   none")


def month_cost(measured: dict[int, Profile]) -> None:
    prices = run_cost.load_prices()
    runs = Decimal(str(prices.hours_per_month)) / BACKUP_EVERY_HOURS
    print(
        f"\nper array-month: one backup every {BACKUP_EVERY_HOURS} h = {runs} backups; "
        f"list prices {prices.region}, {prices.checked} (docs/costs/prices.json)"
    )
    print(
        f"{'members':>8}{'transitions':>13}{'invocations':>13}{'GB-s':>9}"
        f"{'Step Fn $':>11}{'Lambda $':>10}{'total $':>9}{'goal':>8}"
    )
    for m, p in measured.items():
        usage = run_cost.Usage(
            transitions=p.transitions, lambda_seconds=[INVOCATION_SECONDS] * p.invocations
        )
        cost = run_cost.price(usage, prices)
        sfn = next(x.usd for x in cost.lines if x.item == "state transitions") * runs
        lam = (cost.total * runs) - sfn
        total = sfn + lam
        print(
            f"{m:>8}{p.transitions * runs:>13.0f}{p.invocations * runs:>13.0f}"
            f"{usage.gb_seconds * runs:>9.1f}{sfn:>11.4f}{lam:>10.4f}{total:>9.4f}"
            f"{'met' if total <= Decimal('0.05') else 'missed':>8}"
        )
    per = Decimal("0.05") / (runs * prices.usd["transitions1000"] / 1000)
    print(f"  the $0.05 goal allows at most {per:.1f} transitions per backup at this rate")


def limits_check(measured: dict[int, Profile], restores: dict[int, Profile]) -> None:
    volumes = sum(m * n for m, n in MIX.items())
    tib = volumes * MEMBER_GIB / 1024
    print("\nEBS quotas against the fleet (defaults)")
    print(
        f"  snapshots in flight per volume  1 of {SNAPSHOTS_PER_VOLUME} (a backup's snapshots "
        f"complete in {measured[3].seconds:.0f} s, backups are {BACKUP_EVERY_HOURS} h apart)"
    )
    print(
        f"  gp3 storage a full restore adds {tib:.1f} TiB of {GP3_TIB_QUOTA} TiB "
        f"({volumes} volumes of {MEMBER_GIB} GiB); at 1 TiB members it is {volumes} TiB: "
        "raise the quota before counting on a fleet-wide restore"
    )
    inits = sorted({p.initialization for p in restores.values()})
    print(
        f"  FSR                             {FSR_QUOTA} snapshots per Region; the restores here "
        f"chose {', '.join(inits)}: a restore that asks for fsr past the quota falls back"
    )


def main() -> int:
    logging.getLogger("moto").setLevel(logging.CRITICAL)
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    began = time.perf_counter()
    backups: dict[int, Profile] = {}
    restores: dict[int, Profile] = {}
    for m in MIX:
        backups[m], restores[m] = profiles(m)
    print(f"profiles measured in {time.perf_counter() - began:.0f} s of wall time")
    retry = task_retry()
    print(
        f"a Task's Retry on ThrottledError (synthesized): {retry.attempts} attempts, "
        f"{retry.interval:.0f} s x {retry.backoff:g} per attempt up to {retry.max_delay:.0f} s, "
        "full jitter"
    )
    print_calls("backup", backups)
    print_calls("restore onto a replacement instance", restores)
    rng = random.Random(SEED)
    for window in (0, 15):
        out = simulate(fleet(backups), window * 60, rng, retry)
        when = "all at once" if not window else f"in a {window}-minute flexible time window"
        print_outcome(
            f"{ARRAYS} backups from one cron expression, started {when}", fleet(backups), out
        )
        inside = max(out.finish) < BACKUP_EVERY_HOURS * 3600
        print(f"  inside the {BACKUP_EVERY_HOURS} h schedule: {inside}")
    print("\nbackups on one cron expression without a window: when throttling starts")
    print(f"{'arrays':>8}{'throttled':>11}{'past SDK':>10}{'all done':>11}")
    for n in (50, 100, 200, 500, ARRAYS):
        some = fleet(backups)[:n]
        o = simulate(some, 0, random.Random(SEED), retry)
        print(f"{n:>8}{sum(o.throttled.values()):>11}{o.past_sdk:>10}{minutes(max(o.finish)):>11}")
    before = simulate(fleet(restores), 0, random.Random(SEED), FORMER_RETRY)
    print(
        f"\n{ARRAYS} restores at once with the former Retry ({FORMER_RETRY.attempts} attempts, "
        f"up to {FORMER_RETRY.max_delay:.0f} s): {before.failed} exhausted it ("
        + ", ".join(f"{op} {n}" for op, n in before.exhausted.most_common())
        + ")"
    )
    out = simulate(fleet(restores), 0, rng, retry)
    print_outcome(
        f"{ARRAYS} restores at once after a Region-wide failure (array order)", fleet(restores), out
    )
    firsts, lasts = out.finish[:100], out.finish[-100:]
    print(
        "  order                  no priority setting exists: restores start in the order their "
        "recoveries start (here array order); median finish of the first 100 "
        f"{minutes(pct([f for f in firsts if not math.isnan(f)], 0.5))}, of the last 100 "
        f"{minutes(pct([f for f in lasts if not math.isnan(f)], 0.5))}"
    )
    limits_check(backups, restores)
    month_cost(backups)
    print(f"\nbench wall time {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
