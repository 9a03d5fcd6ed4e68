"""Documented request-rate limits as token buckets on the virtual clock: EC2's one per API
action (sized by its category), per account and Region, and Step Functions' StartExecution.
Off unless set (``double.rate_limits = RateLimits.documented()``): the tests that inject their
own throttling keep doing so, and the fleet bench turns these on.

EC2: "Request throttling for the Amazon EC2 API", Amazon EC2 Developer Guide, section "Request
token bucket sizes and refill rates" (https://docs.aws.amazon.com/ec2/latest/devguide/
ec2-api-throttling.html), as stored offline on 2026-11-27:
- Non-mutating actions (Describe*, List*, Search*, Get* not in another category): 100, 20/s.
- Unfiltered and unpaginated non-mutating actions (DescribeInstances, DescribeInstanceStatus,
  DescribeNetworkInterfaces, DescribeSecurityGroups, DescribeSnapshots,
  DescribeSpotInstanceRequests, DescribeVolumes, when asked without pagination or a filter):
  50, 10/s.
- Mutating actions (the rest): 50, 5/s.
- Uncategorized actions with their own buckets, those raidsnap calls: CreateSnapshot and
  CreateSnapshots 100, 5/s; CreateTags and DeleteTags 100, 10/s; CreateVolume, DeleteVolume and
  DeleteSnapshot 100, 5/s; ModifySnapshotAttribute (a copy's hand-over shares each snapshot)
  100, 5/s; RunInstances and StartInstances 5, 2/s.
Each API action has a bucket of its own: "each API is evaluated individually, and you are
throttled on the number of requests you make on a per-API basis. Each request that you make
removes one token from the API's bucket ... requests for other API are not affected" (same page,
"Request rate limiting"); the category gives the bucket's size and refill rate, not a bucket the
actions of the category share. The page sizes the unfiltered and unpaginated calls of the
actions listed there apart from their filtered or paginated ones; the double keeps those calls
in a bucket of their own per action. An empty bucket answers RequestLimitExceeded; each request
takes one token; a bucket refills at its rate up to its size.

Step Functions: "Step Functions service quotas", quotas related to API action throttling, US
East (N. Virginia), US West (Oregon), Europe (Ireland): StartExecution 1,300, 300/s (answered
with ThrottlingException); state transitions 5,000, 1,500/s (the page also says new accounts
start lower and AWS raises them with use). Transitions are not API calls the double sees: the
fleet bench applies that bucket itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

UNFILTERED = frozenset(
    {
        "DescribeInstances",
        "DescribeInstanceStatus",
        "DescribeNetworkInterfaces",
        "DescribeSecurityGroups",
        "DescribeSnapshots",
        "DescribeSpotInstanceRequests",
        "DescribeVolumes",
    }
)
OWN_BUCKETS: dict[str, tuple[float, float]] = {
    "CreateSnapshot": (100, 5),
    "CreateSnapshots": (100, 5),
    "CreateTags": (100, 10),
    "DeleteTags": (100, 10),
    "CreateVolume": (100, 5),
    "DeleteVolume": (100, 5),
    "DeleteSnapshot": (100, 5),
    "ModifySnapshotAttribute": (100, 5),
    "RunInstances": (5, 2),
    "StartInstances": (5, 2),
}
CATEGORIES: dict[str, tuple[float, float]] = {
    "non-mutating": (100, 20),
    "unfiltered non-mutating": (50, 10),
    "mutating": (50, 5),
}
STEP_FUNCTIONS: dict[str, tuple[float, float]] = {
    "StartExecution": (1300, 300),
    "StateTransition": (5000, 1500),
}
READS = ("Describe", "List", "Search", "Get")


def category_of(service: str, operation: str, params: Mapping[str, object]) -> str | None:
    """The category that sizes a request's bucket (an action with a bucket of its own size is
    its own category); None for a call no modelled limit applies to."""
    if service == "stepfunctions":
        return operation if operation in STEP_FUNCTIONS else None
    if service != "ec2":
        return None
    if operation in OWN_BUCKETS:
        return operation
    if operation.startswith(READS):
        paged_or_filtered = any(k in params for k in ("Filters", "MaxResults", "NextToken"))
        if operation in UNFILTERED and not paged_or_filtered:
            return "unfiltered non-mutating"
        return "non-mutating"
    return "mutating"


def bucket_of(service: str, operation: str, params: Mapping[str, object]) -> str | None:
    """The bucket a request draws on: its API action's own (EC2's buckets are per action, see
    above); None for a call no modelled limit applies to."""
    category = category_of(service, operation, params)
    if category is None:
        return None
    if category == "unfiltered non-mutating":
        return f"{operation} unfiltered"
    return operation


@dataclass
class Bucket:
    size: float
    rate: float
    tokens: float
    at: datetime | None = None

    def take(self, now: datetime) -> bool:
        if self.at is not None:
            elapsed = max(0.0, (now - self.at).total_seconds())
            self.tokens = min(self.size, self.tokens + elapsed * self.rate)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


@dataclass
class RateLimits:
    shapes: dict[tuple[str, str], tuple[float, float]]
    buckets: dict[tuple[str, str], Bucket] = field(default_factory=dict)
    # Buckets the rest of a fleet keeps empty until a time: every token is taken as it comes.
    held: dict[tuple[str, str], datetime] = field(default_factory=dict)

    @classmethod
    def documented(cls) -> RateLimits:
        shapes = {("ec2", k): v for k, v in {**CATEGORIES, **OWN_BUCKETS}.items()}
        shapes |= {("stepfunctions", k): v for k, v in STEP_FUNCTIONS.items()}
        return cls(shapes)

    def hold(self, service: str, bucket: str, until: datetime) -> None:
        """The rest of the account's callers (a fleet restoring at once) take every token of
        this bucket as it refills, until ``until``: each request before then is throttled."""
        self.held[(service, bucket)] = until

    def shape(self, service: str, category: str) -> tuple[float, float]:
        """(size, refill rate a second) of the buckets of ``category``."""
        return self.shapes[(service, category)]

    def allow(
        self, service: str, operation: str, params: Mapping[str, object], now: datetime
    ) -> bool:
        """Whether the request gets a token now (and takes it)."""
        category = category_of(service, operation, params)
        name = bucket_of(service, operation, params)
        if category is None or name is None or (service, category) not in self.shapes:
            return True
        if now < self.held.get((service, name), now):
            return False
        size, rate = self.shapes[(service, category)]
        bucket = self.buckets.setdefault((service, name), Bucket(size, rate, size))
        return bucket.take(now)
