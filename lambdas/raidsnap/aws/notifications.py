"""Telling the operator: a notification on the stack's SNS topic."""

from __future__ import annotations

import os
import re
import unicodedata

from raidsnap import clients
from raidsnap.observability import logger

# SNS Publish (API reference): "Subjects must be UTF-8 text with no line breaks or control
# characters, and less than 100 characters long." A subject that breaks this fails the Publish,
# and the notification is lost.
MAX_SUBJECT = 99


def printable(text: str, *, keep_lines: bool = True) -> str:
    """``text`` without control characters (a tag value may hold any character EC2 allows,
    terminal escape sequences included): each becomes a space; line breaks and tabs stay where
    ``keep_lines``."""
    kept = "\n\t" if keep_lines else ""
    return "".join(
        c if c in kept or unicodedata.category(c) not in ("Cc", "Cf") else " " for c in text
    )


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
