"""Telling the operators, through the stack's notification topic."""

from __future__ import annotations

import os

from raidsnap import clients
from raidsnap.observability import logger


def notify(subject: str, message: str) -> None:
    """Publish to TOPIC_ARN (a stack without a topic only logs). SNS subjects hold at most
    100 characters (Publish, SNS API Reference)."""
    topic = os.environ.get("TOPIC_ARN", "").strip()
    if not topic:
        logger.warning("no topic to notify", extra={"subject": subject, "text": message})
        return
    clients.sns().publish(TopicArn=topic, Subject=subject[:100], Message=message)
