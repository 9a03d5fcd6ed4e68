"""What the operator is told goes out whatever a tag or an input holds: SNS refuses a Subject
with a line break or a control character, or of 100 characters or more (the double models that
rule, test_emulation), and a terminal must not be handed escape sequences from a tag value."""

from __future__ import annotations

from typing import Any

import pytest

from raidsnap.aws import notifications
from raidsnap.errors import ArrayNotFoundError, InvalidInputError


class Sns:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def publish(self, **params: Any) -> None:
        self.sent.append(params)


@pytest.fixture()
def sns(monkeypatch: pytest.MonkeyPatch) -> Sns:
    fake = Sns()
    monkeypatch.setattr(notifications.clients, "sns", lambda: fake)
    return fake


def test_a_subject_from_a_tag_with_line_breaks_and_escapes_is_one_printable_line(sns: Sns) -> None:
    array = "db1\nX-Injected: yes\x1b[31m\u202e" + "x" * 200
    notifications.publish("arn:topic", f"raidsnap: no recovery of {array} started", "m")
    (sent,) = sns.sent
    subject = sent["Subject"]
    assert len(subject) < 100
    assert subject.startswith("raidsnap: no recovery of db1 X-Injected: yes [31m")
    assert all(c.isprintable() for c in subject), repr(subject)


def test_a_message_keeps_its_lines_and_loses_its_escapes(sns: Sns) -> None:
    notifications.publish("arn:topic", "s", "line one\n\tline two \x1b]0;pwned\x07 \x00end")
    assert sns.sent[0]["Message"] == "line one\n\tline two  ]0;pwned   end"


def test_an_empty_subject_is_still_a_subject(sns: Sns) -> None:
    notifications.publish("arn:topic", "\n\x1b", "m")
    assert sns.sent[0]["Subject"] == "raidsnap"


def test_a_cause_that_quotes_a_tag_or_stderr_carries_no_control_character() -> None:
    # A cause quotes tag values and an instance's stderr; the console, the CLI and the failure
    # notification show it as it is
    err = InvalidInputError("targetInstanceId", "tag is \x1b]0;pwned\x07db1\x1b[2J\nnext line")
    text = str(err)
    assert "\x1b" not in text and "\x07" not in text
    assert text == "targetInstanceId: tag is  ]0;pwned db1 [2J\nnext line"
    assert str(ArrayNotFoundError("a\u202eb")) == "a b"  # a bidi override (Cf) too
