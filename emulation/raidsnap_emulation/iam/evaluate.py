"""IAM policy evaluation as AWS documents it (IAM User Guide, "Policy evaluation logic" and
"IAM JSON policy elements: Condition operators"), for the policy types a single-account stack
has: identity-based policies of a role and the resource-based policies of topics and keys.

- An explicit Deny in any applicable policy wins; otherwise an Allow is needed; otherwise the
  request is implicitly denied.
- Within one account the union of identity- and resource-based policies applies, except for KMS:
  the key policy must allow, itself or by delegating to the account (then IAM policies decide).
- A resource-based statement whose principal is the account delegates to IAM policies; it allows
  nobody by itself.
- Condition keys are matched without regard to case; values by the operator's rules. A key absent
  from the request makes a condition false, except for negated operators, ``...IfExists``,
  ``Null`` and ``ForAllValues:``.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Context = Mapping[str, Sequence[str]]
"""Request context: condition key (lower case) -> its values (one for a single-valued key)."""

IAM_EVALUATION_DOC = (
    "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html"
)
CONDITION_OPERATORS_DOC = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html"


class UnsupportedPolicyError(ValueError):
    """A policy uses something this evaluator does not implement; it refuses rather than guess."""


@dataclass(frozen=True)
class StatementRef:
    """Where a statement lives: the template resource that holds the policy, and its index."""

    policy: str
    index: int

    def __str__(self) -> str:
        return f"{self.policy}[{self.index}]"


@dataclass(frozen=True)
class Statement:
    ref: StatementRef
    body: Mapping[str, Any]

    @property
    def effect(self) -> str:
        return str(self.body["Effect"])

    @property
    def conditions(self) -> list[tuple[str, str, list[str]]]:
        """(operator, key, policy values) of every condition entry."""
        out = []
        for operator, entries in (self.body.get("Condition") or {}).items():
            for key, values in entries.items():
                out.append((operator, key, _strings(values)))
        return out


@dataclass(frozen=True)
class Principal:
    """Who makes the request: a role (its ARN and session) or a service principal."""

    arn: str
    service: str | None = None
    session: str | None = None
    account: str = "123456789012"

    @property
    def is_service(self) -> bool:
        return self.service is not None

    @property
    def caller(self) -> str:
        """The ARN AWS names in an access-denied message."""
        if self.service is not None:
            return self.arn
        name = self.arn.rsplit("/", 1)[-1]
        return f"arn:aws:sts::{self.account}:assumed-role/{name}/{self.session or name}"


@dataclass(frozen=True)
class Request:
    action: str
    resource: str
    context: Mapping[str, tuple[str, ...]]
    principal: Principal
    # The resource-based policy that applies (a topic's, a key's), by its ARN; None for none.
    resource_policy: str | None = None
    # Set for a request a service makes on the principal's behalf (kms:ViaService).
    via: str | None = None
    # What the caller asked for, to name in a denial: "ec2:CreateSnapshots", ...
    operation: str = ""

    def with_context(self, context: Mapping[str, Sequence[str]]) -> Request:
        return Request(
            self.action,
            self.resource,
            {k: tuple(v) for k, v in context.items()},
            self.principal,
            self.resource_policy,
            self.via,
            self.operation,
        )


@dataclass(frozen=True)
class Decision:
    request: Request
    allowed: bool
    explicit_deny: tuple[StatementRef, ...] = ()
    allowed_by: tuple[StatementRef, ...] = ()
    actor: str | None = None
    reason: str = ""


@dataclass
class PolicySet:
    """The statements that can apply to requests: per principal ARN its identity statements, per
    resource ARN its resource-based statements."""

    identity: dict[str, list[Statement]] = field(default_factory=dict)
    resource: dict[str, list[Statement]] = field(default_factory=dict)

    def replaced(self, ref: StatementRef, body: Mapping[str, Any] | None) -> PolicySet:
        """A copy with one statement's body replaced (None: removed)."""

        def swap(statements: list[Statement]) -> list[Statement]:
            out = []
            for s in statements:
                if s.ref == ref:
                    if body is not None:
                        out.append(Statement(ref, body))
                else:
                    out.append(s)
            return out

        return PolicySet(
            {k: swap(v) for k, v in self.identity.items()},
            {k: swap(v) for k, v in self.resource.items()},
        )

    def statements(self) -> Iterable[Statement]:
        seen: set[StatementRef] = set()
        for group in (*self.identity.values(), *self.resource.values()):
            for s in group:
                if s.ref not in seen:
                    seen.add(s.ref)
                    yield s


# ---------------------------------------------------------------------- matching


def _strings(value: Any) -> list[str]:
    if isinstance(value, list):
        return [_text(v) for v in value]
    return [_text(value)]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@functools.lru_cache(maxsize=4096)
def _glob(pattern: str, case_sensitive: bool = True) -> re.Pattern[str]:
    regex = fnmatch.translate(pattern.replace("[", "[[]"))
    return re.compile(regex, 0 if case_sensitive else re.IGNORECASE)


def glob_match(pattern: str, value: str, case_sensitive: bool = True) -> bool:
    return _glob(pattern, case_sensitive).match(value) is not None


def arn_like(pattern: str, value: str) -> bool:
    """ArnLike: each of the six colon-separated parts is matched on its own."""
    p_parts = pattern.split(":", 5)
    v_parts = value.split(":", 5)
    if len(p_parts) != 6 or len(v_parts) != 6:
        return pattern == "*" or glob_match(pattern, value)
    return all(glob_match(p, v) for p, v in zip(p_parts, v_parts, strict=True))


def _listed(statement: Mapping[str, Any], key: str) -> list[str] | None:
    return _strings(statement[key]) if key in statement else None


def action_matches(statement: Mapping[str, Any], action: str) -> bool:
    actions = _listed(statement, "Action")
    if actions is not None:
        return any(glob_match(a, action, case_sensitive=False) for a in actions)
    not_actions = _listed(statement, "NotAction")
    if not_actions is not None:
        return not any(glob_match(a, action, case_sensitive=False) for a in not_actions)
    raise UnsupportedPolicyError(f"statement without Action or NotAction: {statement}")


def resource_matches(statement: Mapping[str, Any], resource: str) -> bool:
    resources = _listed(statement, "Resource")
    if resources is not None:
        return any(r == "*" or arn_like(r, resource) for r in resources)
    not_resources = _listed(statement, "NotResource")
    if not_resources is not None:
        return not any(r == "*" or arn_like(r, resource) for r in not_resources)
    return True  # resource-based policies may omit Resource: the resource they are attached to


def _account_of(principal_value: str) -> str | None:
    if re.fullmatch(r"\d{12}", principal_value):
        return principal_value
    match = re.fullmatch(r"arn:aws[a-z-]*:iam::(\d{12}):root", principal_value)
    return match.group(1) if match else None


def principal_match(statement: Mapping[str, Any], principal: Principal) -> str | None:
    """How a resource-based statement names the principal: "direct", "account" (delegation to
    IAM policies of that account), or None."""
    if "NotPrincipal" in statement:
        raise UnsupportedPolicyError("NotPrincipal is not emulated")
    named = statement.get("Principal")
    if named is None:
        return None
    if named == "*":
        return "direct"
    if not isinstance(named, Mapping):
        raise UnsupportedPolicyError(f"principal {named!r}")
    for kind, values in named.items():
        for value in _strings(values):
            if kind == "Service" and principal.service == value:
                return "direct"
            if kind == "AWS":
                if value == "*":
                    return "direct"
                if value == principal.arn:
                    return "direct"
                if not principal.is_service and _account_of(value) == principal.account:
                    return "account"
    return None


# ---------------------------------------------------------------------- conditions

_NEGATED = {
    "StringNotEquals",
    "StringNotEqualsIgnoreCase",
    "StringNotLike",
    "ArnNotEquals",
    "ArnNotLike",
    "NumericNotEquals",
}


def _compare(base: str, policy: str, value: str) -> bool:
    if base in ("StringEquals", "StringNotEquals"):
        return value == policy
    if base in ("StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase"):
        return value.lower() == policy.lower()
    if base in ("StringLike", "StringNotLike"):
        return glob_match(policy, value)
    if base in ("ArnEquals", "ArnNotEquals", "ArnLike", "ArnNotLike"):
        return arn_like(policy, value)
    if base == "Bool":
        return value.lower() == policy.lower()
    if base.startswith("Numeric"):
        try:
            left, right = float(value), float(policy)
        except ValueError:
            return False
        return {
            "NumericEquals": left == right,
            "NumericNotEquals": left == right,
            "NumericLessThan": left < right,
            "NumericLessThanEquals": left <= right,
            "NumericGreaterThan": left > right,
            "NumericGreaterThanEquals": left >= right,
        }[base]
    raise UnsupportedPolicyError(f"condition operator {base} is not emulated")


def _substitute(value: str, context: Context) -> str:
    """Policy variables (${aws:PrincipalAccount}...) from the request context."""
    if "${" not in value:
        return value

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in ("*", "?", "$"):
            return name
        found = context.get(name.lower())
        return found[0] if found and len(found) == 1 else match.group(0)

    return re.sub(r"\$\{([^}]+)\}", one, value)


def condition_holds(operator: str, key: str, policy_values: list[str], context: Context) -> bool:
    """One condition entry against the request context."""
    qualifier = ""
    base = operator
    if ":" in operator:
        qualifier, base = operator.split(":", 1)
    if_exists = base.endswith("IfExists")
    if if_exists:
        base = base[: -len("IfExists")]
    values = list(context.get(key.lower(), ()))
    policy = [_substitute(v, context) for v in policy_values]
    if base == "Null":
        absent = not values
        return any((p.lower() == "true") == absent for p in policy)
    negated = base in _NEGATED
    if qualifier == "ForAllValues":
        if not values:
            return True
        if negated:
            return all(not any(_compare(base, p, v) for p in policy) for v in values)
        return all(any(_compare(base, p, v) for p in policy) for v in values)
    if qualifier == "ForAnyValue":
        if not values:
            return False
        if negated:
            return any(not any(_compare(base, p, v) for p in policy) for v in values)
        return any(any(_compare(base, p, v) for p in policy) for v in values)
    if qualifier:
        raise UnsupportedPolicyError(f"condition set operator {qualifier}")
    if not values:
        return if_exists or negated
    matched = any(_compare(base, p, v) for p in policy for v in values)
    return not matched if negated else matched


def conditions_hold(statement: Mapping[str, Any], context: Context) -> bool:
    for operator, entries in (statement.get("Condition") or {}).items():
        for key, values in entries.items():
            if not condition_holds(operator, key, _strings(values), context):
                return False
    return True


def applies(statement: Statement, request: Request, resource_based: bool) -> str | None:
    """Whether the statement applies to the request: "direct"/"account" for a resource-based
    statement (see principal_match), "identity" for an identity-based one, or None."""
    body = statement.body
    if not action_matches(body, request.action):
        return None
    if not resource_matches(body, request.resource):
        return None
    how = "identity"
    if resource_based:
        found = principal_match(body, request.principal)
        if found is None:
            return None
        how = found
    if not conditions_hold(body, request.context):
        return None
    return how


# ---------------------------------------------------------------------- the decision


def evaluate(policies: PolicySet, request: Request, actor: str | None = None) -> Decision:
    identity = (
        [] if request.principal.is_service else policies.identity.get(request.principal.arn, [])
    )
    resource = policies.resource.get(request.resource_policy or "", [])
    if request.resource_policy is not None and request.resource_policy not in policies.resource:
        raise UnsupportedPolicyError(f"no resource policy known for {request.resource_policy}")
    denies: list[StatementRef] = []
    identity_allows: list[StatementRef] = []
    direct_allows: list[StatementRef] = []
    delegating: list[StatementRef] = []
    for statement in identity:
        if applies(statement, request, resource_based=False):
            bucket = denies if statement.effect == "Deny" else identity_allows
            bucket.append(statement.ref)
    for statement in resource:
        how = applies(statement, request, resource_based=True)
        if how is None:
            continue
        if statement.effect == "Deny":
            denies.append(statement.ref)
        elif how == "direct":
            direct_allows.append(statement.ref)
        else:
            delegating.append(statement.ref)
    if denies:
        return Decision(request, False, tuple(denies), (), actor, "explicit deny")
    is_kms = request.action.lower().startswith("kms:")
    if is_kms:
        allowed_by = direct_allows + (identity_allows if delegating else [])
        if direct_allows or (delegating and identity_allows):
            refs = tuple(delegating + allowed_by)
            return Decision(request, True, (), refs, actor)
        reason = (
            "no statement in the key policy allows it"
            if not delegating
            else "no identity-based policy allows it"
        )
        return Decision(request, False, (), (), actor, reason)
    if _crosses(request) or request.action.lower() == "sts:assumerole":
        return _both(request, actor, identity_allows, direct_allows, delegating)
    allowed = identity_allows + direct_allows
    if allowed:
        return Decision(request, True, (), tuple(allowed), actor)
    if request.principal.is_service:
        reason = "no resource-based policy allows it"
    else:
        reason = f"no identity-based policy allows the {request.action} action"
    return Decision(request, False, (), (), actor, reason)


def _crosses(request: Request) -> bool:
    """A request for a resource of another account than the principal's (its ARN names one)."""
    parts = request.resource.split(":")
    owner = parts[4] if len(parts) > 4 and parts[0] == "arn" else ""
    return bool(owner) and owner != request.principal.account


def _both(
    request: Request,
    actor: str | None,
    identity_allows: list[StatementRef],
    direct_allows: list[StatementRef],
    delegating: list[StatementRef],
) -> Decision:
    """Across accounts, the principal's account and the resource's must both allow: an
    identity-based policy, and the resource-based policy naming the principal or its account
    ("Cross-account policy evaluation logic", IAM User Guide). Assuming a role always needs its
    trust policy: naming the principal suffices, naming its account delegates to that account's
    IAM policies."""
    refs = tuple(identity_allows + direct_allows + delegating)
    if not (direct_allows or delegating):
        return Decision(
            request, False, (), (), actor, "the resource-based policy does not allow it"
        )
    if _crosses(request) and not identity_allows:
        reason = f"no identity-based policy allows the {request.action} action"
        return Decision(request, False, (), (), actor, reason)
    if not direct_allows and not identity_allows:
        reason = f"no identity-based policy allows the {request.action} action"
        return Decision(request, False, (), (), actor, reason)
    return Decision(request, True, (), refs, actor)
