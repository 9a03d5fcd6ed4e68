"""Text a person reads, wherever it goes (a terminal, an email, the Step Functions console)."""

from __future__ import annotations

import unicodedata


def printable(text: str, *, keep_lines: bool = True) -> str:
    """``text`` without control characters (a tag value may hold any character EC2 allows,
    terminal escape sequences included, and an on-instance command's stderr may hold colour
    codes): each becomes a space; line breaks and tabs stay where ``keep_lines``."""
    kept = "\n\t" if keep_lines else ""
    return "".join(
        c if c in kept or unicodedata.category(c) not in ("Cc", "Cf") else " " for c in text
    )
