"""Proof that every condition of every grant matters.

From the requests that real workflow runs made and the policies allowed, each Allow statement
with a Condition yields counter-requests: the same request with one condition of that statement
made false (another tag value, the tag missing, another ec2:CreateAction, one more tag key...).
The synthesized policies must deny every one of them. So a condition removed from a policy lets
its counter-request through, and a condition key mistyped lets the real request fail (or, for
the keys whose absence passes a condition, such as ForAllValues, lets its counter-request
through): either way a check below reports it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from raidsnap_emulation.iam.evaluate import (
    Decision,
    PolicySet,
    Request,
    Statement,
    StatementRef,
    condition_holds,
    evaluate,
)

OTHER = "raidsnap-counterexample"


@dataclass(frozen=True)
class Counter:
    statement: StatementRef
    operator: str
    key: str
    how: str
    request: Request

    def __str__(self) -> str:
        return (
            f"{self.statement} {self.operator} {self.key} ({self.how}): "
            f"{self.request.action} on {self.request.resource}"
        )


def _candidates(
    operator: str, values: Sequence[str], context: Mapping[str, tuple[str, ...]], key: str
) -> Iterable[tuple[str, dict[str, tuple[str, ...]]]]:
    base = dict(context)
    current = base.get(key, ())
    yield "another value", {**base, key: (OTHER,)}
    without = dict(base)
    without.pop(key, None)
    yield "key missing", without
    yield "one more value", {**base, key: (*current, OTHER)}
    if operator.startswith("Bool"):
        flipped = tuple("false" if v == "true" else "true" for v in current) or ("false",)
        yield "flipped", {**base, key: flipped}
    for value in values:
        yield "a value the statement names", {**base, key: (value,)}


def falsify(
    operator: str, key: str, values: Sequence[str], context: Mapping[str, tuple[str, ...]]
) -> tuple[str, dict[str, tuple[str, ...]]] | None:
    """A context, changed in ``key`` only, under which the condition entry is false."""
    lowered = key.lower()
    for how, candidate in _candidates(operator, values, context, lowered):
        if not condition_holds(operator, key, list(values), candidate):
            return how, candidate
    return None


def _by_ref(policies: PolicySet) -> dict[StatementRef, Statement]:
    return {s.ref: s for s in policies.statements()}


def counter_requests(
    policies: PolicySet, decisions: Iterable[Decision], per_condition: int = 3
) -> tuple[list[Counter], list[str]]:
    """Counter-requests for every condition of every statement that allowed a recorded request,
    and the conditions no change of the request could make false."""
    statements = _by_ref(policies)
    counters: list[Counter] = []
    unfalsifiable: list[str] = []
    seen: dict[tuple[StatementRef, str, str], int] = {}
    for decision in decisions:
        if not decision.allowed:
            continue
        for ref in decision.allowed_by:
            statement = statements[ref]
            for operator, key, values in statement.conditions:
                slot = (ref, operator, key.lower())
                if seen.get(slot, 0) >= per_condition:
                    continue
                found = falsify(operator, key, values, decision.request.context)
                if found is None:
                    unfalsifiable.append(f"{ref} {operator} {key}")
                    continue
                how, context = found
                seen[slot] = seen.get(slot, 0) + 1
                counters.append(
                    Counter(ref, operator, key, how, decision.request.with_context(context))
                )
    return counters, sorted(set(unfalsifiable))


def allowed_counters(policies: PolicySet, counters: Iterable[Counter]) -> list[str]:
    """Counter-requests the policies let through: a condition that does not restrict."""
    return [str(c) for c in counters if evaluate(policies, c.request).allowed]


def denied_recorded(policies: PolicySet, decisions: Iterable[Decision]) -> list[str]:
    """Requests that real runs made and were allowed, that these policies would deny."""
    out = []
    for d in decisions:
        if d.allowed and not evaluate(policies, d.request).allowed:
            out.append(f"{d.actor}: {d.request.action} on {d.request.resource}")
    return sorted(set(out))


def unexercised(
    policies: PolicySet, decisions: Iterable[Decision], acknowledged: Mapping[StatementRef, str]
) -> list[str]:
    """Allow statements with a Condition that no recorded request was allowed by."""
    used = {ref for d in decisions if d.allowed for ref in d.allowed_by}
    out = []
    for statement in policies.statements():
        if statement.effect != "Allow" or not statement.conditions:
            continue
        if statement.ref not in used and statement.ref not in acknowledged:
            out.append(str(statement.ref))
    return sorted(out)


def mutations(policies: PolicySet) -> Iterable[tuple[str, PolicySet]]:
    """Every condition key of every conditioned Allow statement, once removed and once
    mistyped: (what was changed, the changed policies)."""
    for statement in policies.statements():
        if statement.effect != "Allow":
            continue
        for operator, key, _ in statement.conditions:
            for kind in ("removed", "mistyped"):
                condition = {
                    op: dict(entries) for op, entries in statement.body["Condition"].items()
                }
                value = condition[operator].pop(key)
                if kind == "mistyped":
                    condition[operator][_typo(key)] = value
                condition = {op: e for op, e in condition.items() if e}
                body = {k: v for k, v in statement.body.items() if k != "Condition"}
                if condition:
                    body["Condition"] = condition
                yield (
                    f"{statement.ref} {operator} {key} {kind}",
                    policies.replaced(statement.ref, body),
                )


def _typo(key: str) -> str:
    """The key with two neighbouring letters of its last part swapped (a real typo)."""
    head, _, tail = key.rpartition("/") if "/" in key else key.rpartition(":")
    sep = "/" if "/" in key else ":"
    letters = [i for i in range(len(tail) - 1) if tail[i].isalpha() and tail[i + 1].isalpha()]
    i = letters[len(letters) // 2]
    swapped = tail[:i] + tail[i + 1] + tail[i] + tail[i + 2 :]
    if swapped.lower() == tail.lower():
        swapped = tail + "x"
    return f"{head}{sep}{swapped}"
