"""Auto Scaling launch lifecycle actions a recovery holds open while it restores."""

from __future__ import annotations

from botocore.exceptions import ClientError

from raidsnap import clients
from raidsnap.aws import error_code
from raidsnap.observability import logger


def heartbeat(lifecycle: dict[str, str]) -> int:
    """Keep the action open; 1 if a heartbeat was recorded, 0 if the action is gone."""
    try:
        clients.autoscaling().record_lifecycle_action_heartbeat(
            LifecycleHookName=lifecycle["lifecycleHookName"],
            AutoScalingGroupName=lifecycle["autoScalingGroupName"],
            LifecycleActionToken=lifecycle["lifecycleActionToken"],
        )
    except ClientError as err:
        if error_code(err) == "ValidationError":
            # Past its global timeout (100 heartbeat timeouts or 48 hours, whichever is less)
            # the action ends with its default result; nothing more to keep alive.
            logger.warning("lifecycle action no longer open", extra=lifecycle)
            return 0
        raise
    return 1


def complete(lifecycle: dict[str, str], result: str) -> bool:
    """Complete the action with ``result``; False when it was no longer open (completed before,
    or ended by its timeout with the hook's default result: Auto Scaling then answers
    ValidationError "No active Lifecycle Action")."""
    try:
        clients.autoscaling().complete_lifecycle_action(
            LifecycleHookName=lifecycle["lifecycleHookName"],
            AutoScalingGroupName=lifecycle["autoScalingGroupName"],
            LifecycleActionToken=lifecycle["lifecycleActionToken"],
            LifecycleActionResult=result,
        )
    except ClientError as err:
        # A retried step, or the heartbeat ran out: the action is no longer open.
        if error_code(err) == "ValidationError" and "No active Lifecycle Action" in str(err):
            logger.warning("lifecycle action no longer open", extra=lifecycle)
            return False
        raise
    return True
