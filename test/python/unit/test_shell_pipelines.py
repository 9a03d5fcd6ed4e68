"""No tracked shell script ends a pipeline with a reader that may stop before its writer ends.

Under ``set -o pipefail``, ``producer | grep -q PATTERN`` (or ``| head``, ``| awk '...exit'``,
``| sed ...q``, ``| grep -m N``) fails whenever the reader exits first and the producer dies of
SIGPIPE (status 141), although the pattern was found: the outcome depends on pipe-buffer timing.
Every script of the repository captures the producer's output first and tests it, or uses a
reader that reads to the end (``awk 'NR == 1'``).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

# A pipe into a reader that can exit before reading all of its input.
EARLY_READER = re.compile(
    r"""\|\s*(
        grep(\s+-[A-Za-z]+)*\s+(-[A-Za-z]*[qm]|--quiet|--silent|--max-count)  # grep -q, -m1
      | head\b                          # head -n1, head -c ...
      | awk\b[^|]*\bexit\b              # awk '... exit'
      | sed\b[^|]*[;{'"\s]q[;}'"\s\d]   # sed '...q'
    )""",
    re.VERBOSE,
)
SHEBANG = re.compile(r"^#!\s*/(usr/)?bin/(env\s+)?(ba)?sh\b")


def _shell_scripts() -> list[Path]:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    out = []
    for name in tracked:
        path = REPO / name
        if not path.is_file():
            continue
        if name.endswith(".sh"):
            out.append(path)
            continue
        with path.open("rb") as f:
            head = f.read(64).decode(errors="replace")
        if SHEBANG.match(head):
            out.append(path)
    return out


def _code(line: str) -> str:
    stripped = line.lstrip()
    return "" if stripped.startswith("#") else line


def test_the_check_sees_the_scripts() -> None:
    names = {p.relative_to(REPO).as_posix() for p in _shell_scripts()}
    assert {"scripts/vm/ensure.sh", "ssm/scripts/assemble.sh", "scripts/test.sh"} <= names


@pytest.mark.parametrize(
    "line",
    [
        "apt-cache policy \"$p\" | grep -q 'Candidate: [0-9]'",
        "x=$(printf '%s\\n' a b | head -n1)",
        "apt-cache depends x | awk '/Depends/{print $2; exit}'",
        'out | grep -qx "$holder" || strays+=(1)',
        "seq 100 | sed -n '1p;q'",
        "seq 100 | grep -m1 5",
        "seq 100 | grep -E -qx 5",
    ],
)
def test_the_pattern_catches_early_readers(line: str) -> None:
    assert EARLY_READER.search(line)


@pytest.mark.parametrize(
    "line",
    [
        "x=$(printf '%s\\n' a b | awk 'NR == 1')",
        "sort | uniq -d | awk 'NR == 1'",
        "grep -o 'vol-[0-9a-f]*' file",
        'grep -qx "$name" "$root/etc/modules.order" && continue',
        "[[ $(printf '%s\\n' \"$have\" | grep -cxF -f <(printf x)) -eq 0 ]]",
    ],
)
def test_the_pattern_lets_full_readers_pass(line: str) -> None:
    assert not EARLY_READER.search(line)


def test_no_script_pipes_into_a_reader_that_stops_early() -> None:
    found = []
    for path in _shell_scripts():
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if EARLY_READER.search(_code(line)):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert found == []
