"""The layout of lambdas/raidsnap, read from the source: small modules and functions, thin
handlers, workflows that never reach into each other, and AWS calls only in raidsnap.aws."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "lambdas" / "raidsnap"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_HANDLER_LINES = 15
# What a layer may not import: workflows reach AWS only through raidsnap.aws; plans not at all.
BARRED = {
    "workflows": ("boto3", "raidsnap.clients"),
    "plan": ("boto3", "botocore", "raidsnap.clients", "raidsnap.aws"),
}


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def name(path: Path) -> str:
    return ".".join(("raidsnap", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(
        ".__init__"
    )


def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, with ``from raidsnap import x`` as raidsnap.x."""
    out: set[str] = set()
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{alias.name}" for alias in node.names}
    return out


def workflow_of(module: str) -> str | None:
    """raidsnap.workflows.restore.prepare -> raidsnap.workflows.restore."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[1] == "workflows":
        return ".".join(parts[:3])
    return None


def test_no_module_is_longer_than_the_limit() -> None:
    long = {
        name(p): n for p in modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_is_longer_than_the_limit() -> None:
    long = {}
    for path in modules():
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{name(path)}.{node.name}"] = lines
    assert long == {}


def test_handlers_are_thin() -> None:
    thick = {
        name(p): n
        for p in sorted((PACKAGE / "handlers").glob("[!_]*.py"))
        if (n := len(p.read_text().splitlines())) > MAX_HANDLER_LINES
    }
    assert thick == {}


def test_a_workflow_never_imports_another_workflow() -> None:
    crossing = {}
    for path in modules():
        own = workflow_of(name(path))
        if own is None:
            continue
        others = {w for m in imported(path) if (w := workflow_of(m)) not in (None, own)}
        if others:
            crossing[name(path)] = sorted(str(w) for w in others)
    assert crossing == {}


@pytest.mark.parametrize("layer", ["workflows", "plan"])
def test_workflows_and_plans_call_no_aws_client(layer: str) -> None:
    reaching = {}
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        found = sorted(
            m
            for m in imported(path)
            if any(m == barred or m.startswith(barred + ".") for barred in BARRED[layer])
        )
        calls = [
            node.lineno
            for node in ast.walk(parsed(path))
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "clients"
        ]
        if found or calls:
            reaching[name(path)] = (found, calls)
    assert reaching == {}


def test_every_metric_goes_through_observability() -> None:
    # Powertools' single_metric prints its document even where POWERTOOLS_METRICS_DISABLED is
    # set; raidsnap.observability publishes a metric alone through the path that honours it.
    direct = {
        name(p): found
        for p in modules()
        if (found := sorted(m for m in imported(p) if m.endswith(".single_metric")))
    }
    assert direct == {}


def test_the_layers_exist() -> None:
    # The checks above pass trivially on a folder that is missing.
    assert (PACKAGE / "plan").is_dir()
    assert (PACKAGE / "workflows").is_dir()
    assert (PACKAGE / "aws").is_dir()


def untyped_annotations(path: Path) -> list[int]:
    """Lines where a step's data is annotated as a bare dict of anything."""
    found = []
    for node in ast.walk(parsed(path)):
        annotations: list[ast.expr | None] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            annotations += [a.annotation for a in args] + [node.returns]
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        elif isinstance(node, ast.Assign):  # a type alias such as State = dict[str, Any]
            annotations.append(node.value)
        for annotation in annotations:
            text = ast.unparse(annotation) if annotation is not None else ""
            if "dict[str, Any]" in text.replace("typing.", "") or text in ("dict", "Dict"):
                found.append(node.lineno)
    return sorted(set(found))


def test_workflow_steps_read_and_write_typed_contracts() -> None:
    # The state a step reads and the result it writes are pydantic contracts; an untyped dict
    # is how a step came to rewrite keys that were not its own.
    untyped = {
        name(path): lines
        for path in sorted((PACKAGE / "workflows").rglob("*.py"))
        if (lines := untyped_annotations(path))
    }
    assert untyped == {}
