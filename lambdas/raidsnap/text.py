"""Text a person reads, wherever it goes (a terminal, an email, the Step Functions console)."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
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
        f"{key} {'yes' if value is True else value}"
        for key, value in payload.items()
        if key not in ("array", "callback") and value is not None
    ]
    return str(payload.get("array", "?")) + (f" ({', '.join(rest)})" if rest else "")
