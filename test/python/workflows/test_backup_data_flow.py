"""The backup state machine's data flow, as synthesized: each Task reads named keys and writes its
own, every key a state reads is there on every path that reaches it, and the failure path still
finds what it must thaw and let go of whichever step failed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.template import Template
from raidsnap_emulation.world import backed_up, make_array, sets_of

Keys = frozenset[str]


def backup_definition(template: Path) -> dict[str, Any]:
    (found,) = [d for name, d in Template(template).state_machines().values() if name == "backup"]
    return dict(json.loads(found))


def _top(path: object) -> str | None:
    """The top-level key a reference path reads ("$.plan.array" -> "plan"); None for "$"
    itself and for the context object."""
    text = str(path)
    if not text.startswith("$.") or text.startswith("$$"):
        return None
    return text[2:].split(".", 1)[0].split("[", 1)[0]


def _parameter_reads(value: object) -> set[str]:
    if isinstance(value, dict):
        reads: set[str] = set()
        for key, inner in value.items():
            if str(key).endswith(".$") and (top := _top(inner)) is not None:
                reads.add(top)
            else:
                reads |= _parameter_reads(inner)
        return reads
    return set()


def _choice_reads(rule: dict[str, Any]) -> set[str]:
    if "IsPresent" in rule:  # a rule that asks whether the key is there may find it missing
        return set()
    reads = {t for t in [_top(rule.get("Variable", ""))] if t}
    for inner in rule.get("And", []) + rule.get("Or", []) + [rule.get("Not", {})]:
        reads |= _choice_reads(inner) if inner else set()
    return reads


def reads_of(state: dict[str, Any]) -> set[str]:
    reads = _parameter_reads(state.get("Parameters"))
    for rule in state.get("Choices", []):
        reads |= _choice_reads(rule)
    for field in ("SecondsPath", "ErrorPath", "CausePath", "InputPath"):
        if (top := _top(state.get(field, ""))) is not None:
            reads.add(top)
    return reads


def _placed(entry: Keys, result: Keys | None, result_path: object) -> Keys:
    """The keys after a result lands at ResultPath (None: what the result holds is unknown)."""
    if result_path == "$":
        return result or frozenset()
    top = _top(result_path)
    return entry | {top} if top else entry


def successors(name: str, state: dict[str, Any], entry: Keys) -> list[tuple[str, Keys]]:
    kind = state["Type"]
    out: list[tuple[str, Keys]] = []
    if kind == "Choice":
        targets = [r["Next"] for r in state["Choices"]] + [state.get("Default")]
        return [(t, entry) for t in targets if t]
    if kind == "Pass":
        shape = state.get("Parameters")
        result = frozenset(k.removesuffix(".$") for k in shape) if isinstance(shape, dict) else None
        after = _placed(entry, result, state.get("ResultPath", "$"))
    elif kind == "Task":
        after = _placed(entry, None, state.get("ResultPath", "$"))
        for catch in state.get("Catch", []):
            out.append((catch["Next"], _placed(entry, None, catch.get("ResultPath", "$"))))
    else:
        after = entry
    if "OutputPath" in state:
        after = frozenset()  # the output is one key's content: nothing known of its keys
    if state.get("Next"):
        out.append((state["Next"], after))
    return out


def keys_on_entry(definition: dict[str, Any]) -> dict[str, Keys]:
    """For every state, the top-level keys present on every path that reaches it."""
    states = definition["States"]
    entry: dict[str, Keys] = {definition["StartAt"]: frozenset()}
    todo = [definition["StartAt"]]
    while todo:
        name = todo.pop()
        for target, keys in successors(name, states[name], entry[name]):
            merged = keys if target not in entry else entry[target] & keys
            if merged != entry.get(target):
                entry[target] = merged
                todo.append(target)
    return entry


def test_every_backup_task_reads_named_keys_and_writes_its_own(template: Path) -> None:
    states = backup_definition(template)["States"]
    tasks = {n: s for n, s in states.items() if s["Type"] == "Task"}
    whole = {
        n: s.get("ResultPath", "$") for n, s in tasks.items() if s.get("ResultPath", "$") == "$"
    }
    assert whole == {}
    unnamed = sorted(n for n, s in tasks.items() if "Parameters" not in s)
    assert unnamed == []


def test_every_key_a_backup_state_reads_is_there_on_every_path_to_it(template: Path) -> None:
    definition = backup_definition(template)
    entry = keys_on_entry(definition)
    missing = {
        name: sorted(reads_of(state) - entry[name])
        for name, state in definition["States"].items()
        if name in entry and reads_of(state) - entry[name]
    }
    assert missing == {}
    assert set(entry) == set(definition["States"]), "every state is reachable"


@pytest.mark.parametrize("consistency", ["crash", "fsfreeze"])
def test_a_backup_that_fails_taking_its_snapshots_thaws_and_lets_restores_run(
    emu: Emulation, consistency: str
) -> None:
    # GIVEN an array with a complete set, whose next CreateSnapshots keeps failing
    fx = make_array(emu.hosts, "db1", 3)
    before = backed_up(emu.hosts, emu.run, fx)
    emu.double.fail("ec2", "CreateSnapshots", times=5, code="InternalError")
    mark = len(emu.double.calls)
    # WHEN a backup runs (after freezing the filesystem, for fsfreeze)
    run = emu.run("backup", {"array": "db1", "consistency": consistency})
    # THEN it fails, leaves the filesystem thawed (one thaw, fsfreeze only) and no new set
    assert run.status == "FAILED"
    assert run.error
    assert emu.hosts.state(fx.instance_id).frozen == set()
    sent = [c.params.get("DocumentName") for c in emu.double.calls[mark:] if c.applied]
    assert sent.count("raidsnap-thaw") == (1 if consistency == "fsfreeze" else 0)
    assert set(sets_of("db1")) == {before}
    # AND its hold on the array is gone: a restore of the set it had starts and succeeds
    restore = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert restore.status == "SUCCEEDED", restore.cause
    assert restore.output["setId"] == before
