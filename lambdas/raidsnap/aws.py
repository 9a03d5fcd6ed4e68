"""Turning AWS client errors into raidsnap's named errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import ClientError

from raidsnap.errors import ThrottledError

THROTTLE_CODES = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "TooManyRequestsException",
        "SnapshotCreationPerVolumeRateExceeded",
        "ConcurrentSnapshotLimitExceeded",
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
