"""Telling the operator: a notification on the stack's SNS topic."""

from __future__ import annotations

from raidsnap import clients

# SNS takes a Subject of at most 100 characters.
MAX_SUBJECT = 100


def publish(topic: str, subject: str, message: str) -> None:
    clients.sns().publish(TopicArn=topic, Subject=subject[:MAX_SUBJECT], Message=message)
