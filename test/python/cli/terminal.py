"""The command in a real terminal: a pseudo-terminal of fixed size (the standard library's pty),
rendered by a terminal emulator (pyte) into the screen a person would see, live views and
prompts included; and the screens made comparable from run to run (ids, times, durations and
ports normalised) for golden files."""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyte

REPO = Path(__file__).resolve().parents[3]
COLUMNS = 160  # wide enough that the CLI's tables never wrap their cells
LINES = 200  # tall enough that nothing a command prints scrolls off


@dataclass
class Shown:
    command: str
    exit_code: int
    screen: str  # what the terminal shows at the end, trailing blanks trimmed
    seconds: float = 0.0


@dataclass
class Terminal:
    env: dict[str, str]
    answer: bytes = b"y\r"
    # A confirmation prompt the terminal answers (typer.confirm's), once per command.
    prompt: re.Pattern[str] = re.compile(r"\[y/N\]:?\s*$")
    log: list[Shown] = field(default_factory=list)

    def run(self, *args: str, timeout: float = 60.0) -> Shown:
        """``raidsnap ARGS`` in a fresh terminal, until it exits; a prompt is answered yes."""
        began = time.monotonic()
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
        child = subprocess.Popen(
            [sys.executable, "-m", "raidsnap_cli", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=self.env,
            cwd=REPO,
            start_new_session=True,
        )
        os.close(slave)
        screen = pyte.Screen(COLUMNS, LINES)
        stream = pyte.ByteStream(screen)
        try:
            self._drain(master, child, screen, stream, timeout)
            code = child.wait(timeout=10)
        finally:
            os.close(master)
            if child.poll() is None:  # the command this test started, by its PID
                child.kill()
                child.wait(5)
        took = time.monotonic() - began
        shown = Shown(f"raidsnap {' '.join(args)}", code, _text(screen), took)
        self.log.append(shown)
        return shown

    def _drain(
        self,
        master: int,
        child: subprocess.Popen[bytes],
        screen: pyte.Screen,
        stream: pyte.ByteStream,
        timeout: float,
    ) -> None:
        deadline = time.monotonic() + timeout
        answered = False
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"still running after {timeout} s:\n{_text(screen)}")
            ready, _, _ = select.select([master], [], [], 0.1)
            if not ready:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal has closed it
                data = b""
            if not data:
                return
            stream.feed(data)
            if not answered and self.prompt.search(_text(screen)):
                os.write(master, self.answer)
                answered = True


def _text(screen: pyte.Screen) -> str:
    return "\n".join(line.rstrip() for line in screen.display).rstrip("\n")


# ---------------------------------------------------------------------- golden screens


class Normaliser:
    """Makes a screen the same from run to run: each resource id becomes a label numbered in
    order of first appearance (so that the same volume keeps its label from screen to screen),
    and times, durations, ports, process ids and random suffixes become placeholders."""

    _IDS = re.compile(r"\b(i|vol|snap)-[0-9a-f]{17}\b")
    _RULES = (
        (re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{4,8}\b"), "<stamp>"),
        (re.compile(r"\b(backup|restore)-[0-9a-f]{12}\b"), r"\1-<hex>"),
        (re.compile(r"\b[0-9a-f]{8}(:[0-9a-f]{8}){3}\b"), "<md-uuid>"),
        (
            re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2})?(\.\d+)?(\+00:00|Z)?( UTC)?"),
            "<time>",
        ),
        # A time of day alone (a step's line, an ETA): the run's clock started when it did.
        (re.compile(r"\b\d{2}:\d{2}(:\d{2})?( UTC)?\b"), "<clock>"),
        (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:<port>"),
        (re.compile(r"\b(process|pid)(\s+)\d+"), r"\1\2<pid>"),
        # A run's cost counts its functions' wall-clock time: its total and GB-seconds vary.
        (re.compile(r"\$[0-9.e+-]+ this run"), "<usd> this run"),
        (re.compile(r"Lambda duration [0-9.]+ GB-s"), "Lambda duration <gb-s> GB-s"),
        (re.compile(r"\+?\b\d+(\.\d+)?(ms|s|m|h|d)( \d+(ms|s|m))?\b( so far)?"), "<duration>"),
    )

    def __init__(self, *paths: Path) -> None:
        self._labels: dict[str, str] = {}
        self._paths = [str(p) for p in paths]

    def __call__(self, text: str) -> str:
        for path in self._paths:
            text = text.replace(path, "<state>")
        text = self._IDS.sub(self._label, text)
        for pattern, replacement in self._RULES:
            text = pattern.sub(replacement, text)
        return text

    def _label(self, found: re.Match[str]) -> str:
        kind = found.group(1)
        if found.group(0) not in self._labels:
            count = sum(1 for label in self._labels.values() if label.startswith(f"<{kind}-"))
            self._labels[found.group(0)] = f"<{kind}-{count + 1}>"
        return self._labels[found.group(0)]


_LABEL = r"'?<(?:i|vol|snap)-\d+>'?"
_LABELS = re.compile(rf"{_LABEL}(?:, {_LABEL})+")


def comparable(screen: str) -> list[str]:
    """A normalised screen as compared: table rules and column padding depend on the width of
    what a cell holds (a duration of 9 s or of 12 s), so runs of spaces and of rule characters
    count as one; and a list of ids that the run sorted by id comes in any order of their
    labels, so such a list counts as the set of its labels."""
    lines = []
    for raw in screen.splitlines():
        line = re.sub(r"([━─═ ])\1+", r"\1", raw).rstrip()
        line = _LABELS.sub(lambda found: ", ".join(sorted(found.group(0).split(", "))), line)
        if line:
            lines.append(line)
    return lines
