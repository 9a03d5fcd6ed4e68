"""The README's pictures of the workflows are drawn from the ASL files and stay current."""

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


def test_readme_diagrams_match_the_state_machine_files() -> None:
    diagram = _diagram_module()
    readme = (ROOT / "README.md").read_text()
    assert diagram.render_readme(readme) == readme, (
        "run: .venv/bin/python scripts/diagram.py --write"
    )


def test_every_state_machine_has_a_picture_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    for path in (ROOT / "statemachines").glob("*.asl.json"):
        name = path.name.removesuffix(".asl.json")
        assert f"<!-- diagram:{name} -->\n```mermaid" in readme, name


def test_every_state_appears_in_its_picture() -> None:
    diagram = _diagram_module()
    for path in (ROOT / "statemachines").glob("*.asl.json"):
        definition = json.loads(path.read_text())
        chart = diagram.mermaid(definition)
        for state in definition["States"]:
            assert f"  {state}" in chart, (path.name, state)
