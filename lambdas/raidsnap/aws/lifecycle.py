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


# What became of a launch whose lifecycle action is no longer open, from the instance's
# lifecycle state (DescribeAutoScalingInstances, LifecycleState; "Amazon EC2 Auto Scaling
# instance lifecycle" and "How lifecycle hooks work", user guide): a completed CONTINUE moves it
# Pending:Wait -> Pending:Proceed -> InService (Standby, Detaching follow only InService); an
# ABANDON, or the hook's timeout with its default result ABANDON, terminates it (Terminating,
# Terminating:Wait, Terminating:Proceed, Terminated), and once gone the group no longer lists it.
PUT_IN_SERVICE = frozenset(
    {"Pending:Proceed", "InService", "EnteringStandby", "Standby", "Detaching", "Detached"}
)
STILL_WAITING = frozenset({"Pending", "Pending:Wait"})


def launch_outcome(lifecycle: dict[str, str]) -> str | None:
    """CONTINUE if the launch went on into service, ABANDON if its instance is being terminated
    or is gone from the group, None while Auto Scaling still shows it waiting."""
    instance = lifecycle["instanceId"]
    answer = clients.autoscaling().describe_auto_scaling_instances(InstanceIds=[instance])
    found = [
        i.get("LifecycleState", "")
        for i in answer.get("AutoScalingInstances", [])
        if i.get("InstanceId") == instance
    ]
    if not found:
        return "ABANDON"
    if found[0] in PUT_IN_SERVICE:
        return "CONTINUE"
    return None if found[0] in STILL_WAITING else "ABANDON"
