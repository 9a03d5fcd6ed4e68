"""Whatever a caller sends, an invalid backup input ends in InvalidInput and changes nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import make_array

ARRAY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
READ_ONLY = ("Describe", "Get", "List")

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=6,
)
bad_names = (st.text().filter(lambda s: not ARRAY_NAME.fullmatch(s))) | st.integers() | st.none()


@st.composite
def invalid_inputs(draw: st.DrawFn) -> Any:
    """Inputs that are wrong in exactly one way a caller could get wrong."""
    valid: dict[str, Any] = {"array": "db1"}
    kind = draw(
        st.sampled_from(
            [
                "not-an-object",
                "bad-array",
                "no-array",
                "bad-consistency",
                "bad-trigger",
                "unknown-field",
            ]
        )
    )
    if kind == "not-an-object":
        return draw(json_values.filter(lambda v: not isinstance(v, dict)))
    if kind == "bad-array":
        return {**valid, "array": draw(bad_names)}
    if kind == "no-array":
        return {k: v for k, v in valid.items() if k != "array"}
    if kind == "bad-consistency":
        return {
            **valid,
            "consistency": draw(json_values.filter(lambda v: v not in ("crash", "fsfreeze", None))),
        }
    if kind == "bad-trigger":
        return {
            **valid,
            "trigger": draw(json_values.filter(lambda v: v not in ("schedule", "manual"))),
        }
    key = draw(st.text(min_size=1).filter(lambda k: k not in ("array", "consistency", "trigger")))
    return {**valid, key: draw(json_values)}


@pytest.fixture(scope="module")
def world(template: Path) -> Iterator[Emulation]:
    with Emulation(template) as emu:
        make_array(emu.hosts, "db1", 3)
        yield emu


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(payload=invalid_inputs())
def test_no_invalid_backup_input_changes_anything(world: Emulation, payload: Any) -> None:
    mark = len(world.double.calls)
    run = world.run("backup", payload)
    assert (run.status, run.error) == ("FAILED", "InvalidInput"), (payload, run.cause)
    changes = [
        f"{c.service}:{c.operation}"
        for c in world.double.calls[mark:]
        if c.service in ("ec2", "ssm") and not c.operation.startswith(READ_ONLY)
    ]
    assert changes == []
