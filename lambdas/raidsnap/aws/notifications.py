"""Telling the operator: a notification on the stack's SNS topic."""

from __future__ import annotations

import os

from raidsnap import clients
from raidsnap.observability import logger

# SNS takes a Subject of at most 100 characters.
MAX_SUBJECT = 100


def publish(topic: str, subject: str, message: str) -> None:
    clients.sns().publish(TopicArn=topic, Subject=subject[:MAX_SUBJECT], Message=message)


def notify(subject: str, message: str) -> None:
    """Publish to the stack's topic (TOPIC_ARN); a stack without one only logs."""
    topic = os.environ.get("TOPIC_ARN", "").strip()
    if not topic:
        logger.warning("no topic to notify", extra={"subject": subject, "text": message})
        return
    publish(topic, subject, message)
