"""IAM condition operators, pure: a policy's `Condition` block compiled once, evaluated per request.

The rules are IAM's (IAM User Guide, "Condition operators", "Single-valued vs. multivalued context
keys", "...IfExists condition operators"):

* a block is true when every operator in it is true; an operator is true when every key under it is
  true; a key with several policy values is true when any value matches (for a negated operator:
  when the request's value matches none of them);
* a key absent from the request makes a positive operator false and a negated one
  (`StringNotEquals`, `StringNotLike`, `ArnNotLike`...) true; `...IfExists` makes any operator true
  when its key is absent; `Null` tests the absence itself;
* `ForAllValues:` is true when every request value matches (and when the key is absent or empty);
  `ForAnyValue:` is true when at least one does (false when the key is absent);
* condition key names are case-insensitive, values are case-sensitive (except `...IgnoreCase` and
  `Bool`); `*` and `?` are wildcards only in the `...Like` operators.

smlocal supports the string, ARN, `Bool` and `Null` operators; a document using another one (numeric,
date, IP address, binary) or a policy variable (`${...}`) is refused when the file is loaded, so a
policy never silently means something else here than in AWS.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from emulator.errors import PolicyFileInvalid

#: The request's context: lower-cased key name -> its values (a single-valued key has one).
Context = Mapping[str, tuple[str, ...]]
#: One request value against the policy's values: does it match any of them?
_Match = Callable[[str, tuple[str, ...]], bool]


@lru_cache(maxsize=1024)
def wildcard(pattern: str, ignore_case: bool = False) -> re.Pattern[str]:
    """IAM's wildcards: `*` any run of characters (also none), `?` exactly one."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(body, re.DOTALL | (re.IGNORECASE if ignore_case else 0))


@lru_cache(maxsize=1024)
def arn_pattern(pattern: str) -> tuple[re.Pattern[str], ...] | None:
    """An ARN pattern's six parts as wildcards (None: `*`, any ARN; () : not an ARN pattern)."""
    if pattern == "*":
        return None
    parts = pattern.split(":", 5)
    return tuple(wildcard(p) for p in parts) if len(parts) == 6 else ()


def arn_matches(pattern: str, arn: str) -> bool:
    """ArnLike's rule (and the Resource element's): each of the six colon-separated parts is matched
    on its own, with wildcards; the last part (the resource) may itself hold colons."""
    compiled = arn_pattern(pattern)
    if compiled is None:
        return True
    got = arn.split(":", 5)
    if len(compiled) != 6 or len(got) != 6:
        return False
    return all(w.fullmatch(g) is not None for w, g in zip(compiled, got, strict=True))


def _equals(value: str, wanted: tuple[str, ...]) -> bool:
    return value in wanted


def _equals_ignore_case(value: str, wanted: tuple[str, ...]) -> bool:
    folded = value.casefold()
    return any(folded == w.casefold() for w in wanted)


def _like(value: str, wanted: tuple[str, ...]) -> bool:
    return any(wildcard(w).fullmatch(value) is not None for w in wanted)


def _arn_like(value: str, wanted: tuple[str, ...]) -> bool:
    return any(arn_matches(w, value) for w in wanted)


def _bool(value: str, wanted: tuple[str, ...]) -> bool:
    return any(value.lower() == w.lower() for w in wanted)


#: base operator -> (single-value match, negated)
OPERATORS: dict[str, tuple[_Match, bool]] = {
    "StringEquals": (_equals, False),
    "StringNotEquals": (_equals, True),
    "StringEqualsIgnoreCase": (_equals_ignore_case, False),
    "StringNotEqualsIgnoreCase": (_equals_ignore_case, True),
    "StringLike": (_like, False),
    "StringNotLike": (_like, True),
    "ArnEquals": (_arn_like, False),  # IAM treats ArnEquals like ArnLike
    "ArnNotEquals": (_arn_like, True),
    "ArnLike": (_arn_like, False),
    "ArnNotLike": (_arn_like, True),
    "Bool": (_bool, False),
}
SET_PREFIXES = ("ForAnyValue", "ForAllValues")


@dataclass(frozen=True)
class KeyTest:
    """One key under one operator, e.g. `StringLike: {"sagemaker:TargetContainerHostname": ["a*"]}`."""

    operator: str  # as written, for messages
    key: str  # lower-cased
    values: tuple[str, ...]
    match: _Match | None  # None: the Null operator
    negated: bool
    if_exists: bool
    qualifier: str | None  # ForAnyValue, ForAllValues or None

    def holds(self, context: Context) -> bool:
        present = context.get(self.key)
        if self.match is None:  # Null: "true" means the key must be absent
            absent = not present
            return any((v.lower() == "true") == absent for v in self.values)
        if not present:
            if self.if_exists:
                return True
            if self.qualifier == "ForAllValues":
                return True
            if self.qualifier == "ForAnyValue":
                return False
            return self.negated
        single = self._single
        if self.qualifier == "ForAllValues":
            return all(single(v) for v in present)
        if self.qualifier == "ForAnyValue":
            return any(single(v) for v in present)
        # A single-valued key (the only kind smlocal's requests carry) has one value.
        if self.negated:
            return all(single(v) for v in present)
        return any(single(v) for v in present)

    def _single(self, value: str) -> bool:
        assert self.match is not None
        matched = self.match(value, self.values)
        return not matched if self.negated else matched


def _parse_operator(name: str) -> tuple[str | None, str, bool]:
    qualifier: str | None = None
    base = name
    prefix, sep, rest = name.partition(":")
    if sep:
        if prefix not in SET_PREFIXES:
            raise PolicyFileInvalid(f"unknown condition operator qualifier {prefix!r} in {name!r}")
        qualifier, base = prefix, rest
    if_exists = base.endswith("IfExists")
    if if_exists:
        base = base[: -len("IfExists")]
    if base == "Null":
        if qualifier is not None or if_exists:
            raise PolicyFileInvalid(f"condition operator {name!r}: Null takes no qualifier and no IfExists")
        return None, base, False
    if base not in OPERATORS:
        supported = ", ".join([*OPERATORS, "Null"])
        raise PolicyFileInvalid(
            f"condition operator {name!r} is not supported by smlocal (supported: {supported}; "
            "each with IfExists, ForAnyValue: or ForAllValues:)"
        )
    return qualifier, base, if_exists


def _values(operator: str, key: str, raw: object) -> tuple[str, ...]:
    items = raw if isinstance(raw, list) else [raw]
    values: list[str] = []
    for item in items:
        if isinstance(item, bool):
            values.append("true" if item else "false")
        elif isinstance(item, str | int | float):
            values.append(str(item))
        else:
            raise PolicyFileInvalid(f"condition {operator} {key}: values must be strings, not {item!r}")
        if "${" in values[-1]:
            raise PolicyFileInvalid(
                f"condition {operator} {key}: policy variables (${{...}}) are not supported by smlocal"
            )
    if not values:
        raise PolicyFileInvalid(f"condition {operator} {key}: no values")
    return tuple(values)


def compile_condition(block: object) -> tuple[KeyTest, ...]:
    """A statement's `Condition` element -> its tests (all must hold). Refuses what smlocal cannot
    evaluate exactly as IAM does."""
    if block is None:
        return ()
    if not isinstance(block, dict):
        raise PolicyFileInvalid("Condition must be an object of operators")
    tests: list[KeyTest] = []
    for operator, keys in block.items():
        qualifier, base, if_exists = _parse_operator(operator)
        if not isinstance(keys, dict) or not keys:
            raise PolicyFileInvalid(f"condition {operator} must be an object of condition keys")
        match, negated = (None, False) if base == "Null" else OPERATORS[base]
        for key, raw in keys.items():
            tests.append(
                KeyTest(
                    operator, key.lower(), _values(operator, key, raw), match, negated, if_exists, qualifier
                )
            )
    return tuple(tests)


def conditions_hold(tests: tuple[KeyTest, ...], context: Context) -> bool:
    return all(t.holds(context) for t in tests)
