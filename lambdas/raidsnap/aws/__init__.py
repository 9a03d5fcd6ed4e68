"""Turning AWS client errors into raidsnap's named errors."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from botocore.exceptions import ClientError

from raidsnap.errors import ThrottledError

T = TypeVar("T")

# Waits between looks at a resource EC2 has just created but may not show yet (seconds).
NOT_YET_VISIBLE_WAITS = (0.5, 1.0, 2.0, 4.0, 8.0)
# How this process waits, and reads elapsed time; the local emulation points both at its
# virtual clock.
pause: Callable[[float], None] = time.sleep
monotonic: Callable[[], float] = time.monotonic

THROTTLE_CODES = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "TooManyRequestsException",
        "SnapshotCreationPerVolumeRateExceeded",
        "ConcurrentSnapshotLimitExceeded",
        # DynamoDB's throttling (botocore model, ProvisionedThroughputExceededException: "The
        # request was denied due to request throttling"; on-demand tables too, per partition
        # key range: "DynamoDB throttling resolution guide"). A restore that cannot write its
        # record of a volume it created retries the step rather than fail and leave it.
        "ProvisionedThroughputExceededException",
    }
)


def error_code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


@contextmanager
def throttling_as_named_error() -> Iterator[None]:
    """Throttling that outlived the SDK's own retries becomes ThrottledError, which every
    workflow Task retries with a long backoff; other client errors pass unchanged."""
    try:
        yield
    except ClientError as err:
        code = error_code(err)
        if code in THROTTLE_CODES:
            raise ThrottledError(f"{code}: {err}") from err
        raise


def not_found(err: ClientError) -> bool:
    return error_code(err).endswith(".NotFound")


def once_visible(call: Callable[[], T]) -> T:
    """``call``, retried while EC2 answers *.NotFound: right after a create, EC2 may not see the
    new resource yet ("Eventual consistency in the Amazon EC2 API"). About 15 s in all; after
    that the error is real and goes to the caller."""
    for wait in NOT_YET_VISIBLE_WAITS:
        try:
            return call()
        except ClientError as err:
            if not not_found(err):
                raise
        pause(wait)
    return call()
