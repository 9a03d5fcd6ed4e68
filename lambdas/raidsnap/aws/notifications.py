"""Telling the operator: a notification on the stack's SNS topic."""

from __future__ import annotations

import os
import re

from raidsnap import clients
from raidsnap.observability import logger
from raidsnap.text import printable

# SNS Publish (API reference): "Subjects must be UTF-8 text with no line breaks or control
# characters, and less than 100 characters long." A subject that breaks this fails the Publish,
# and the notification is lost.
MAX_SUBJECT = 99


def subject_of(text: str) -> str:
    """A Subject SNS accepts: one line of printable text, shorter than 100 characters."""
    one_line = re.sub(r"\s+", " ", printable(text, keep_lines=False)).strip()
    return one_line[:MAX_SUBJECT] or "raidsnap"


def publish(topic: str, subject: str, message: str) -> None:
    clients.sns().publish(TopicArn=topic, Subject=subject_of(subject), Message=printable(message))


def notify(subject: str, message: str) -> None:
    """Publish to the stack's topic (TOPIC_ARN); a stack without one only logs."""
    topic = os.environ.get("TOPIC_ARN", "").strip()
    if not topic:
        logger.warning("no topic to notify", extra={"subject": subject, "text": message})
        return
    publish(topic, subject, message)
