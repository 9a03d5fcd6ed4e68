"""The pictures of the workflows (docs/architecture.md) are drawn from the ASL files and stay
current."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _diagram_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("diagram", ROOT / "scripts" / "diagram.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DOC = ROOT / "docs" / "architecture.md"


def test_the_diagrams_match_the_state_machine_files() -> None:
    diagram = _diagram_module()
    doc = DOC.read_text()
    assert diagram.render(doc) == doc, "run: .venv/bin/python scripts/diagram.py --write"


def test_every_state_machine_has_a_picture() -> None:
    doc = DOC.read_text()
    for path in (ROOT / "statemachines").glob("*.asl.json"):
        name = path.name.removesuffix(".asl.json")
        assert f"<!-- diagram:{name} -->\n```mermaid" in doc, name


def test_every_state_appears_in_its_picture() -> None:
    diagram = _diagram_module()
    for path in (ROOT / "statemachines").glob("*.asl.json"):
        definition = json.loads(path.read_text())
        chart = diagram.mermaid(definition)
        for state in definition["States"]:
            assert f"  {state}" in chart, (path.name, state)
