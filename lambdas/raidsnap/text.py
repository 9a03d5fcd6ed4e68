"""Text a person reads, wherever it goes (a terminal, an email, the Step Functions console)."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any


def printable(text: str, *, keep_lines: bool = True) -> str:
    """``text`` without control characters (a tag value may hold any character EC2 allows,
    terminal escape sequences included, and an on-instance command's stderr may hold colour
    codes): each becomes a space; line breaks and tabs stay where ``keep_lines``."""
    kept = "\n\t" if keep_lines else ""
    return "".join(
        c if c in kept or unicodedata.category(c) not in ("Cc", "Cf") else " " for c in text
    )


def input_words(payload: Any) -> str:
    """An execution input in words, not JSON: ``db1 (mode replace, set latest)``. The recovery's
    callback is never shown."""
    if not isinstance(payload, Mapping):
        return str(payload)
    rest = [
        f"{key} {'yes' if value is True else listed(value) if isinstance(value, list) else value}"
        for key, value in payload.items()
        if key not in ("array", "callback") and value is not None
    ]
    return str(payload.get("array", "?")) + (f" ({', '.join(rest)})" if rest else "")


def listed(items: Iterable[object]) -> str:
    """Items as a sentence lists them, not as Python prints a list: ``0, 1 and 2``."""
    words = [str(i) for i in items]
    if len(words) <= 1:
        return "".join(words) or "none"
    return ", ".join(words[:-1]) + " and " + words[-1]


def counted(noun: str, items: Iterable[object]) -> str:
    """``noun`` with its items, singular for one: ``member 2``, ``members 0 and 1``; ``no
    members`` for none (never ``members none``, which reads as a list)."""
    words = list(items)
    if not words:
        return f"no {noun}s"
    return f"{noun}{'' if len(words) == 1 else 's'} {listed(words)}"


def degraded_because(missing_slots: Iterable[object]) -> str:
    """Why md called an array degraded: the slots with no working member, or, when md named
    none (every slot still had a member, e.g. while one is being rebuilt), that md said so."""
    slots = list(missing_slots)
    if slots:
        return f"no working member in {counted('slot', slots)}"
    return "md reported it degraded, though every slot had a member"
