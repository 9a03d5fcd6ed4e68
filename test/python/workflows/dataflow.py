"""What each state of a synthesized state machine reads, and which top-level keys are there on
every path that reaches it.

A path that a state reads and the input does not have fails the state with States.Runtime, which
no Catch (not even States.ALL) catches: the run would end without its clean-up (Step Functions
developer guide, "Error handling in Step Functions": States.ALL cannot catch States.Runtime; ASL
specification, "Parameters": a path that does not match fails the state). So every key a
Parameters path, a Choice Variable (not guarded by IsPresent), a SecondsPath or an InputPath
reads must be there on every path, including every Catch's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from raidsnap_emulation.template import Template

Keys = frozenset[str]


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


def _present_in(rule: dict[str, Any]) -> Keys:
    """The key a matching rule proves is there (a top-level IsPresent: true)."""
    top = _top(rule.get("Variable", ""))
    return frozenset({top}) if top and rule.get("IsPresent") is True else frozenset()


def successors(name: str, state: dict[str, Any], entry: Keys) -> list[tuple[str, Keys]]:
    kind = state["Type"]
    out: list[tuple[str, Keys]] = []
    if kind == "Choice":
        out = [(r["Next"], entry | _present_in(r)) for r in state["Choices"]]
        return out + ([(state["Default"], entry)] if state.get("Default") else [])
    if kind == "Pass":
        shape = state.get("Parameters")
        result = frozenset(k.removesuffix(".$") for k in shape) if isinstance(shape, dict) else None
        after = _placed(entry, result, state.get("ResultPath", "$"))
    elif kind == "Task":
        # A ResultSelector shapes the result: its keys are what the result holds.
        shape = state.get("ResultSelector")
        result = frozenset(k.removesuffix(".$") for k in shape) if isinstance(shape, dict) else None
        after = _placed(entry, result, state.get("ResultPath", "$"))
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


def definition_of(template: Path, machine: str) -> dict[str, Any]:
    (found,) = [d for name, d in Template(template).state_machines().values() if name == machine]
    return dict(json.loads(found))


def unguarded_reads(definition: dict[str, Any]) -> dict[str, list[str]]:
    """For every state, the keys it reads that some path to it does not have."""
    entry = keys_on_entry(definition)
    return {
        name: sorted(reads_of(state) - entry[name])
        for name, state in definition["States"].items()
        if name in entry and reads_of(state) - entry[name]
    }
