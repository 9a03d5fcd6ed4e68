"""Add up the test runners' results into one closing line: 'N passed, N failed'."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def main(results: Path) -> int:
    passed = failed = skipped = 0
    for xml in sorted(results.glob("*.xml")):
        root = ET.parse(xml).getroot()  # noqa: S314 - our own pytest output
        for suite in root.iter("testsuite"):
            total = int(suite.get("tests", 0))
            bad = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
            skip = int(suite.get("skipped", 0))
            print(f"  {xml.stem:8} {total - bad - skip} passed, {bad} failed, {skip} skipped")
            passed, failed, skipped = passed + total - bad - skip, failed + bad, skipped + skip
    jest = results / "jest.json"
    if jest.exists():
        report = json.loads(jest.read_text())
        ok, bad = report["numPassedTests"], report["numFailedTests"]
        skip = report["numPendingTests"] + report.get("numTodoTests", 0)
        print(f"  {'jest':8} {ok} passed, {bad} failed, {skip} skipped")
        passed, failed, skipped = passed + ok, failed + bad, skipped + skip
    line = f"{passed} passed, {failed} failed"
    print(line + (f", {skipped} skipped" if skipped else ""))
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
