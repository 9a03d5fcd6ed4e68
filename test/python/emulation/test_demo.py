"""`make demo` is the first thing a new user runs: its story (a backup, a member lost and the
automated recovery, a drill, a restore whose prewarm fails) must end with every run succeeded,
and read as a person would tell it: no machine lines, no wall of identical polls, every step
said in words, and a warning never hidden behind SUCCEEDED."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from raidsnap_emulation import demo
from raidsnap_emulation.harness import synthesize

STAMP = re.compile(r"^\s*\+\d{2}:\d{2}\s+")
# A timeline line: stamp, the function's short name, its narration.
TIMELINE = re.compile(r"^\s*\+\d{2}:\d{2}\s+(?P<module>\S+)\s+(?P<text>.*)$")


@dataclass(frozen=True)
class Demo:
    status: int
    out: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


@pytest.fixture(scope="module")
def shown() -> Iterator[Demo]:
    """The demo run once, as `make demo` runs it (scripts/demo.sh's environment), its output
    captured whole: the functions print to the process's stdout, as Lambda's runtime sends
    their stdout to the log."""
    synthesize()
    with pytest.MonkeyPatch.context() as env:
        for key in list(os.environ):
            if key.startswith(("AWS_", "MOTO_", "POWERTOOLS_")):
                env.delenv(key)
        env.setenv("AWS_DEFAULT_REGION", "us-east-1")
        env.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
        env.setenv("POWERTOOLS_LOG_LEVEL", "WARNING")
        env.setenv("POWERTOOLS_METRICS_DISABLED", "true")
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            status = demo.main()
    yield Demo(status, printed.getvalue())


def test_the_demo_ends_with_every_run_succeeded(shown: Demo) -> None:
    assert shown.status == 0, shown.out[-3000:]
    assert "automated recovery" in shown.out and "FAILED" not in shown.out, shown.out[-3000:]


def test_no_line_is_a_json_document(shown: Demo) -> None:
    # A metric the functions publish (Embedded Metric Format) is a JSON line on stdout in
    # Lambda; the demo disables metrics, and every one of them must honour it.
    documents = []
    for line in shown.lines:
        with contextlib.suppress(ValueError):
            json.loads(line)
            documents.append(line)
    assert documents == []


def test_no_line_shows_a_python_mapping_or_list(shown: Demo) -> None:
    # A run's input or a list of ids printed as Python shows them ({'array': 'db1'}, ['vol-…'])
    # is raw data, not words.
    raw = [line for line in shown.lines if re.search(r"\{'\w+': |\['[^']*'(, '[^']*')*\]", line)]
    assert raw == []


def test_no_line_is_repeated_more_than_twice_in_a_row(shown: Demo) -> None:
    runs: list[tuple[str, int]] = []
    for line in (STAMP.sub("", line) for line in shown.lines):
        if runs and runs[-1][0] == line:
            runs[-1] = (line, runs[-1][1] + 1)
        else:
            runs.append((line, 1))
    assert [(line, n) for line, n in runs if n > 2] == []


def test_every_step_is_told_in_words(shown: Demo) -> None:
    told = [m for line in shown.lines if (m := TIMELINE.match(line))]
    assert len(told) > 40  # the timeline is there to be judged
    bare = [m.group(0).strip() for m in told if m.group("text").strip() in ("done", "")]
    assert bare == []


def test_repeated_polls_are_counted_with_their_times(shown: Demo) -> None:
    # The failing prewarm is looked at many times before it fails: one line says how many
    # times, from when to when.
    looked = [line for line in shown.lines if "raidsnap-prewarm" in line and "looked" in line]
    assert looked, shown.out
    assert all(re.search(r"looked \d+ times, \+\d\d:\d\d → \+\d\d:\d\d", x) for x in looked)


def test_the_drill_names_the_metric_it_published(shown: Demo) -> None:
    reports = [line for line in shown.lines if "drill_report" in line]
    assert reports and all("DrillSucceeded" in line for line in reports), reports
    assert "DrillSucceeded or DrillFailed" not in shown.out


def test_the_mount_stands_out_on_its_own_line(shown: Demo) -> None:
    mounted = [line for line in shown.lines if "ARRAY MOUNTED" in line]
    # the recovery's restore, the drill's read-only copy, the restore whose prewarm fails
    assert len(mounted) == 3, mounted
    assert sum("ARRAY MOUNTED at /data — usable now" in line for line in mounted) == 2


def test_the_summary_shows_the_prewarm_failure(shown: Demo) -> None:
    summary = shown.out[shown.out.rindex("summary") :].splitlines()
    (row,) = [line for line in summary if "restore, prewarm fails" in line]
    assert "SUCCEEDED, prewarm failed" in row, row


def test_the_demo_modules_keep_the_layout_limits() -> None:
    # The limits test/python/unit/test_layout.py sets for the functions' package.
    for path in sorted(Path(demo.__file__).parent.glob("demo*.py")):
        text = path.read_text()
        assert len(text.splitlines()) <= 400, path.name
        long = {
            node.name: n
            for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.FunctionDef)
            and (n := (node.end_lineno or node.lineno) - node.lineno + 1) > 60
        }
        assert long == {}, path.name
