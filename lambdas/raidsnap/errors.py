"""Named errors.

Lambda reports a failure under the exception's class name; the workflows turn that class name
into the public error name of the design (``InvalidInputError`` -> ``InvalidInput``) when a run
fails, so the class names here end in ``Error`` and :func:`public_name` strips it.
"""

from __future__ import annotations

import json

from raidsnap.text import printable


class RaidsnapError(Exception):
    """Base of every error a person is meant to read. Its text (the run's Cause, which the
    console, the CLI and the failure notification show) never carries a control character: a
    tag value or an instance's stderr quoted in it could otherwise drive a terminal."""

    def __str__(self) -> str:
        return printable(super().__str__())


class InvalidInputError(RaidsnapError):
    """The execution input is wrong; ``field`` names the offending field."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


class ConfigurationError(RaidsnapError):
    """A function's environment is missing a setting it needs."""


class ArrayNotFoundError(RaidsnapError):
    pass


class ArrayInstanceChangedError(RaidsnapError):
    """The instance tagged with the array is not the one raidsnap recorded for it: a tag alone
    never moves an array (an operator confirms a move with ``raidsnap move``)."""


class SnapshotSetNotFoundError(RaidsnapError):
    pass


class IncompleteSnapshotSetError(RaidsnapError):
    pass


class SnapshotsInRecycleBinError(RaidsnapError):
    """Snapshots the set recorded were deleted into the Recycle Bin (a retention rule kept
    them): the set is whole again once they are restored from it."""


class SnapshotLockFailedError(RaidsnapError):
    """The array's lock policy could not lock a set's snapshots (the set itself is taken)."""


class InstanceNotReadyError(RaidsnapError):
    pass


class CommandFailedError(RaidsnapError):
    pass


class HookFailedError(RaidsnapError):
    """Not in the design's list: an application hook of the backup failed or ran out of time on
    the instance (the post hook has run; the cause says how it went)."""


class ArrayDegradedError(RaidsnapError):
    """The array was degraded when its set was taken: the set is kept, marked degraded."""


class SnapshotFailedError(RaidsnapError):
    """A snapshot of the set ended in ``error``."""


class VolumeFailedError(RaidsnapError):
    """A volume the run created ended in ``error``."""


class MemberNotIdentifiedError(RaidsnapError):
    """Replace mode: a member the release document could not map to a volume (its device is
    gone) cannot be told apart from the instance's other attached volumes."""


class RestoreInProgressError(RaidsnapError):
    """Another restore of the same array holds the lock."""


class BackupInProgressError(RaidsnapError):
    """A backup of the same array is taking its snapshots."""


class DrillVerificationFailedError(RaidsnapError):
    """A drill restored the set, but what came up on the drill instance is not that array."""


class DrillTeardownFailedError(RaidsnapError):
    """A drill could not remove every volume its restore created."""


class RestoreAlreadyStartedError(RaidsnapError):
    """A recovery's restore name is taken by an execution this step cannot start again (it has
    ended, or has another input): no restore of this recovery's is running for it to wait on."""


class UntrustedReportError(RaidsnapError):
    """What reached a recovery as its restore's report of a mounted array is not that: another
    array's, another run's, or without the set and mount point a mounted array has."""


class LaunchAbandonedError(RaidsnapError):
    """Not in the design's list: the restore mounted the array on a launched instance, but the
    launch's lifecycle action was no longer open when the recovery went to complete it with
    CONTINUE (its heartbeat timeout had run out): Auto Scaling ended it with the hook's default
    result, ABANDON, and terminates the instance."""


class RunStoppedError(RaidsnapError):
    """Not in the design's list: the step's own execution no longer runs (stopped by hand while
    the step's invocation went on: StopExecution ends no Lambda invocation under way), so the
    step does nothing more. Nobody sees it but the logs: the run has ended."""


class CopyFailedError(RaidsnapError):
    """A copy of a set to another Region or account could not be made, or ended in error."""


class ThrottledError(RaidsnapError):
    """EC2 or SSM throttled us beyond the SDK's retries; the workflow retries with backoff."""


def public_name(error_type: str) -> str:
    """``InvalidInputError`` -> ``InvalidInput``; other names (``States.Timeout``) pass through."""
    if error_type.endswith("Error") and error_type[:-5] and "." not in error_type:
        return error_type[:-5]
    return error_type


def cause_message(cause: str) -> str:
    """The readable message inside a caught error's Cause: a Lambda function's error arrives as
    JSON with ``errorMessage`` and a stack trace; other causes are plain text already."""
    try:
        parsed = json.loads(cause)
    except json.JSONDecodeError:
        return cause
    if isinstance(parsed, dict) and "errorMessage" in parsed:
        return str(parsed["errorMessage"])
    return cause
