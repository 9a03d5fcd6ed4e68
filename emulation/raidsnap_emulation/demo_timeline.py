"""How `make demo` tells a run: each invocation in words (demo_narration), looks that saw
nothing new folded into one line that says how many there were and from when to when, and the
moment an array is mounted on a line of its own."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from rich.markup import escape

from raidsnap_emulation.demo_narration import NARRATORS, STEPS, document_of
from raidsnap_emulation.harness import Invocation

MODULE_WIDTH = 22


def narrate(inv: Invocation) -> str:
    """One invocation in words (rich markup; what the step returned is escaped)."""
    if inv.error_type:
        return (
            f"[red]{escape(inv.error_type)}[/red]: {escape(str(inv.error_message))} "
            "[dim](the workflow decides: retry or fail)[/dim]"
        )
    r = inv.result if isinstance(inv.result, dict) else {}
    step = str(inv.event.get("step") or "") if isinstance(inv.event, dict) else ""
    narrator = STEPS.get((inv.module, step)) or STEPS.get((inv.module, ""))
    narrator = narrator or NARRATORS.get(inv.module)
    if narrator is not None:
        try:
            return escape(narrator(r))
        except (KeyError, TypeError, ValueError):
            pass
    if isinstance(r.get("narration"), str):
        return escape(str(r["narration"]))
    status = f", status {r['status']}" if "status" in r else ""
    return escape(f"step {step or inv.module} returned{status}")


# ---------------------------------------------------------------------- the timeline


@dataclass(frozen=True)
class Told:
    """An invocation told: when (seconds since the run began), by which function, what."""

    at: int
    module: str
    text: str
    milestone: str | None = None
    looks: int = 1
    last: int = 0


def stamp(seconds: int) -> str:
    return f"+{seconds // 60:02d}:{seconds % 60:02d}"


def folded(invocations: list[Invocation], start: datetime) -> list[Told]:
    """The invocations told in order, a run of looks told alike folded into the first."""
    out: list[Told] = []
    for inv in invocations:
        at = int((inv.at - start).total_seconds())
        told = Told(at, inv.module, narrate(inv), mounted(inv), last=at)
        prev = out[-1] if out else None
        if (
            prev is not None
            and (prev.module, prev.text) == (told.module, told.text)
            and prev.milestone is None
            and told.milestone is None
        ):
            out[-1] = Told(prev.at, prev.module, prev.text, None, prev.looks + 1, at)
        else:
            out.append(told)
    return out


def timeline(invocations: list[Invocation], start: datetime) -> Iterator[str]:
    """The lines (rich markup) that tell ``invocations``, stamped from ``start``."""
    for told in folded(invocations, start):
        text = told.text
        if told.looks > 1:
            text += (
                f" [dim](looked {told.looks} times, {stamp(told.at)} → {stamp(told.last)})[/dim]"
            )
        yield f"   [dim]{stamp(told.at)}[/dim]  [cyan]{told.module:<{MODULE_WIDTH}}[/cyan] {text}"
        if told.milestone:
            yield (
                f"   [dim]{stamp(told.at)}[/dim]  [bold green]★ {escape(told.milestone)}"
                "[/bold green]"
            )


def mounted(inv: Invocation) -> str | None:
    """The milestone of a restore: an assemble that succeeded has the array mounted."""
    r = inv.result if isinstance(inv.result, dict) else {}
    if inv.module != "command_poll" or r.get("status") != "success":
        return None
    if document_of(r)[1] != "assemble":
        return None
    out = r.get("result") or {}
    if out.get("readOnly"):
        return (
            f"ARRAY MOUNTED read-only at {out.get('mountPoint')} — "
            "a copy to verify, the live array untouched"
        )
    return f"ARRAY MOUNTED at {out.get('mountPoint')} — usable now"
