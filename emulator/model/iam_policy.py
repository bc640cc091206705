"""Identity-based IAM policy documents, pure: parsed once, evaluated per request.

The evaluation is IAM's for one account and identity-based policies only (IAM User Guide, "Policy
evaluation logic"): a request is denied by default; an applicable `Allow` statement allows it; an
applicable `Deny` statement denies it whatever allows it (an explicit deny wins). A statement applies
when its `Action` (or `NotAction`) and `Resource` (or `NotResource`) match the request and every test
of its `Condition` holds (`iam_conditions.py`).

Actions match case-insensitively with `*` and `?`; resources match ARN part by ARN part, case-sensitively
(SageMaker's ARNs carry lower-cased names). What IAM's CreatePolicy refuses is refused here, with the
statement named: no `Effect`, `Allow`/`Deny` misspelt, no action, no resource, a `Principal` in an
identity-based policy, an action without its service prefix, a resource that is neither `*` nor an ARN.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from emulator.errors import PolicyFileInvalid
from emulator.model.iam_conditions import (
    Context,
    KeyTest,
    arn_matches,
    compile_condition,
    conditions_hold,
    wildcard,
)

VERSIONS = ("2012-10-17", "2008-10-17")
_STATEMENT_FIELDS = {"Sid", "Effect", "Action", "NotAction", "Resource", "NotResource", "Condition"}


class Decision(enum.Enum):
    ALLOWED = "allowed"
    IMPLICIT_DENY = "implicit deny"  # no statement allows
    EXPLICIT_DENY = "explicit deny"  # a Deny statement applies


@dataclass(frozen=True)
class Request:
    """What a policy is evaluated against: the action (`service:Operation`), the resource's ARN and
    the request's context keys (lower-cased names)."""

    action: str
    resource: str
    context: Context


@dataclass(frozen=True)
class Statement:
    where: str  # "policy 2, statement 1 (Sid ...)", for messages
    allow: bool
    actions: tuple[str, ...]
    not_action: bool
    resources: tuple[str, ...]
    not_resource: bool
    conditions: tuple[KeyTest, ...]
    _actions: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # compiled once: the request path only matches
        object.__setattr__(self, "_actions", tuple(wildcard(a, ignore_case=True) for a in self.actions))

    def applies(self, request: Request) -> bool:
        action_hit = any(a.fullmatch(request.action) for a in self._actions)
        if action_hit == self.not_action:
            return False
        resource_hit = any(arn_matches(r, request.resource) for r in self.resources)
        if resource_hit == self.not_resource:
            return False
        return conditions_hold(self.conditions, request.context)


@dataclass(frozen=True)
class Policy:
    statements: tuple[Statement, ...]


def _strings(where: str, field: str, raw: object) -> tuple[str, ...]:
    items = raw if isinstance(raw, list) else [raw]
    if not items or not all(isinstance(i, str) and i for i in items):
        raise PolicyFileInvalid(f"{where}: {field} must be a string or a list of strings")
    return tuple(str(i) for i in items)


def _one_of(where: str, statement: dict[str, object], name: str) -> tuple[tuple[str, ...], bool]:
    positive, negative = statement.get(name), statement.get(f"Not{name}")
    if (positive is None) == (negative is None):
        raise PolicyFileInvalid(f"{where}: give exactly one of {name} and Not{name}")
    if positive is not None:
        return _strings(where, name, positive), False
    return _strings(where, f"Not{name}", negative), True


def _statement(where: str, raw: object) -> Statement:
    if not isinstance(raw, dict):
        raise PolicyFileInvalid(f"{where}: a statement must be an object")
    sid = raw.get("Sid")
    if sid is not None:
        where = f"{where} (Sid {sid})"
    if "Principal" in raw or "NotPrincipal" in raw:
        raise PolicyFileInvalid(
            f"{where}: an identity-based policy has no Principal (Has prohibited field Principal)"
        )
    unknown = sorted(set(raw) - _STATEMENT_FIELDS)
    if unknown:
        raise PolicyFileInvalid(f"{where}: unknown field(s) {', '.join(unknown)}")
    effect = raw.get("Effect")
    if effect not in ("Allow", "Deny"):
        raise PolicyFileInvalid(f"{where}: Effect must be Allow or Deny, not {effect!r}")
    actions, not_action = _one_of(where, raw, "Action")
    for action in actions:
        if action != "*" and ":" not in action:
            raise PolicyFileInvalid(
                f"{where}: action {action!r} must be prefaced by a service, e.g. sagemaker:"
            )
    resources, not_resource = _one_of(where, raw, "Resource")
    for resource in resources:
        if resource != "*" and (not resource.startswith("arn:") or len(resource.split(":", 5)) != 6):
            raise PolicyFileInvalid(f'{where}: Resource {resource} must be in ARN format or "*"')
        if "${" in resource:
            raise PolicyFileInvalid(f"{where}: policy variables (${{...}}) are not supported by smlocal")
    try:
        conditions = compile_condition(raw.get("Condition"))
    except PolicyFileInvalid as exc:
        raise PolicyFileInvalid(f"{where}: {exc.message}") from None
    return Statement(where, effect == "Allow", actions, not_action, resources, not_resource, conditions)


def parse_policy(raw: object, where: str = "policy") -> Policy:
    """One policy document (the JSON object IAM's CreatePolicy takes) -> Policy."""
    if not isinstance(raw, dict):
        raise PolicyFileInvalid(f"{where}: a policy document must be an object")
    version = raw.get("Version", VERSIONS[1])
    if version not in VERSIONS:
        raise PolicyFileInvalid(f"{where}: Version must be one of {', '.join(VERSIONS)}, not {version!r}")
    unknown = sorted(set(raw) - {"Version", "Id", "Statement"})
    if unknown:
        raise PolicyFileInvalid(f"{where}: unknown field(s) {', '.join(unknown)}")
    statements = raw.get("Statement")
    if isinstance(statements, dict):
        statements = [statements]
    if not isinstance(statements, list) or not statements:
        raise PolicyFileInvalid(f"{where}: Statement must be a statement or a non-empty list of them")
    return Policy(tuple(_statement(f"{where}, statement {i + 1}", s) for i, s in enumerate(statements)))


def evaluate(policies: Sequence[Policy], request: Request) -> Decision:
    """IAM's decision over one identity's policies: explicit deny, else allow, else implicit deny."""
    allowed = False
    for policy in policies:
        for statement in policy.statements:
            if statement.applies(request):
                if not statement.allow:
                    return Decision.EXPLICIT_DENY
                allowed = True
    return Decision.ALLOWED if allowed else Decision.IMPLICIT_DENY
