"""Draw each state machine as a Mermaid flowchart, straight from its ASL file.

`python scripts/diagram.py` prints the diagrams; `--write` puts them into docs/architecture.md
between the `<!-- diagram:NAME -->` and `<!-- /diagram:NAME -->` markers. A test checks that page
is current, so the picture cannot drift from the definition."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
SHAPES = {
    "Task": ('["', '"]'),
    "Choice": ('{"', '"}'),
    "Wait": ('(["', '"])'),
    "Pass": ('[/"', '"/]'),
    "Succeed": ('(("', '"))'),
    "Fail": ('(("', '"))'),
    "Map": ('[["', '"]]'),
    "Parallel": ('[["', '"]]'),
}


def _label(name: str, state: dict[str, Any]) -> str:
    kind = state["Type"]
    if kind == "Wait":
        return f"{name}<br/>wait"
    if kind == "Fail":
        return f"{name}<br/>fail"
    return name


def mermaid(definition: dict[str, Any]) -> str:
    lines = ["flowchart TD", f"  start([start]) --> {definition['StartAt']}"]
    lines += _states(definition["States"])
    # Every Task catches into the failure path: one node says so instead of an edge per Task.
    # A Task without its own Catch gets the file's DefaultCatch when deployed
    # (lib/constructs/workflow.ts).
    default = [definition["DefaultCatch"]] if "DefaultCatch" in definition else []
    catchers: dict[tuple[str, str], list[str]] = {}
    for name, state in definition["States"].items():
        own_default = default if state["Type"] in ("Task", "Parallel") else []
        for catch in state.get("Catch", own_default):
            errors = [e for e in catch.get("ErrorEquals", []) if e != "States.ALL"]
            label = " ".join(errors) or "error"
            catchers.setdefault((catch["Next"], label), []).append(name)
    for (target, label), sources in catchers.items():
        if len(sources) > 2:
            lines.append(
                f'  {target}_errors{{{{"any of {len(sources)} steps fails"}}}} -.-> {target}'
            )
        else:
            lines += [f"  {src} -.->|{label}| {target}" for src in sources]
    return "\n".join(lines)


def _states(states: dict[str, Any], indent: str = "  ") -> list[str]:
    """Nodes and edges of ``states``; a Parallel's branches as subgraphs of their own."""
    lines = []
    for name, state in states.items():
        left, right = SHAPES.get(state["Type"], ('["', '"]'))
        lines.append(f"{indent}{name}{left}{_label(name, state)}{right}")
    for name, state in states.items():
        if "Next" in state:
            lines.append(f"{indent}{name} --> {state['Next']}")
        for choice in state.get("Choices", []):
            lines.append(f"{indent}{name} -->|{_condition(choice)}| {choice['Next']}")
        if "Default" in state:
            lines.append(f"{indent}{name} -->|otherwise| {state['Default']}")
        for i, branch in enumerate(state.get("Branches", []), start=1):
            lines.append(f"{indent}{name} -->|branch {i}| {branch['StartAt']}")
            lines.append(f'{indent}subgraph {name}_branch_{i}["{name}, branch {i}"]')
            lines += _states(branch["States"], indent + "  ")
            lines.append(f"{indent}end")
    return lines


def _condition(choice: dict[str, Any]) -> str:
    if "And" in choice:
        return " and ".join(_condition(c) for c in choice["And"])
    variable = str(choice.get("Variable", "")).removeprefix("$.")
    for op, value in choice.items():
        if op in ("Variable", "Next"):
            continue
        return f"{variable} {_op(op)} {value}".replace('"', "'")
    return variable


def _op(op: str) -> str:
    return {
        "StringEquals": "=",
        "IsPresent": "present",
        "BooleanEquals": "=",
        "NumericGreaterThan": ">",
        "NumericLessThan": "<",
    }.get(op, op)


def diagrams() -> dict[str, str]:
    out = {}
    for path in sorted((ROOT / "statemachines").glob("*.asl.json")):
        out[path.name.removesuffix(".asl.json")] = mermaid(json.loads(path.read_text()))
    return out


def render(text: str) -> str:
    for name, chart in diagrams().items():
        block = f"<!-- diagram:{name} -->\n```mermaid\n{chart}\n```\n<!-- /diagram:{name} -->"
        pattern = re.compile(rf"<!-- diagram:{name} -->.*?<!-- /diagram:{name} -->", re.S)
        text = pattern.sub(lambda _m, b=block: b, text)
    return text


def main(argv: list[str]) -> int:
    if "--write" in argv:
        DOC.write_text(render(DOC.read_text()))
        return 0
    for name, chart in diagrams().items():
        print(f"## {name}\n```mermaid\n{chart}\n```")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
