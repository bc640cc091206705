"""What smlocal does not implement of the operations it serves, in one place: the refusal text, the
members refused wherever they appear, and the enum values smlocal implements of the enums it turns
into its own values.

botocore's models grow: a release adds a member (`PrefixAwareRoutingConfig`) or an enum value
(RoutingStrategy `PREFIX_AWARE`, `KV_AWARE`) that boto3 then sends. Such a request must never become
a 500 (boto3 retries those, three times): it is ValidationException 400
``{feature} is not supported by smlocal yet. See docs/api-coverage.md.``, answered by `check` after
the request passed botocore's own validation and before the handler parses it. A value of an enum in
IMPLEMENTED_VALUES that is not listed there is refused, whatever the installed model holds, so a
newer botocore cannot reach a domain conversion with a value smlocal has never seen.

tests/unit/test_every_model_value.py sends every enum value and every member of the installed models
to a real server: none may be a 500. A member neither refused here nor read by a handler is accepted
and ignored (docs/api-coverage.md lists them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import botocore.model

from emulator.errors import ValidationFailed

__all__ = ["IMPLEMENTED_VALUES", "REFUSED_MEMBERS", "check", "unsupported"]


def unsupported(feature: str) -> ValidationFailed:
    """The one refusal text of a feature smlocal does not implement."""
    return ValidationFailed(f"{feature} is not supported by smlocal yet. See docs/api-coverage.md.")


#: enum shape name (botocore's) -> the values smlocal implements. Any other value is refused as
#: "{member path} {value}", e.g. "ProductionVariant RoutingConfig RoutingStrategy PREFIX_AWARE".
IMPLEMENTED_VALUES: dict[str, frozenset[str]] = {
    "RoutingStrategy": frozenset({"LEAST_OUTSTANDING_REQUESTS", "RANDOM"}),
}

#: structure shape name -> member -> the feature named in the refusal. Refused whenever present.
REFUSED_MEMBERS: dict[str, dict[str, str]] = {
    "CreateEndpointConfigInput": {
        "ShadowProductionVariants": "ShadowProductionVariants",
        "ExplainerConfig": "ExplainerConfig",
        "DataCaptureConfig": "DataCaptureConfig",
    },
    "ProductionVariant": {
        "ManagedInstanceScaling": "ProductionVariant ManagedInstanceScaling",
        "InstancePools": "ProductionVariant InstancePools",
        "CapacityReservationConfig": "ProductionVariant CapacityReservationConfig",
    },
    "ProductionVariantRoutingConfig": {
        "PrefixAwareRoutingConfig": "ProductionVariant RoutingConfig PrefixAwareRoutingConfig",
    },
}

#: shape names whose subtree holds something of the tables above (computed once per shape)
_relevant: dict[tuple[object, str], bool] = {}


def _resolver(shape: botocore.model.Shape) -> object:
    return getattr(shape, "_shape_resolver", None) or id(shape)


def _children(shape: botocore.model.Shape) -> list[botocore.model.Shape]:
    if shape.type_name == "structure":
        return list(shape.members.values())
    if shape.type_name == "list":
        return [shape.member]
    if shape.type_name == "map":
        return [shape.value]
    return []


def _holds_refusals(shape: botocore.model.Shape, seen: frozenset[str] = frozenset()) -> bool:
    key = (_resolver(shape), shape.name)
    cached = _relevant.get(key)
    if cached is not None:
        return cached
    if shape.name in seen:
        return False
    result = shape.name in REFUSED_MEMBERS or shape.name in IMPLEMENTED_VALUES
    result = result or any(_holds_refusals(c, seen | {shape.name}) for c in _children(shape))
    if not seen or result:  # a False below the top may have been cut short by a cycle
        _relevant[key] = result
    return result


def check(shape: botocore.model.Shape, params: Any, where: str = "") -> None:
    """Raise `unsupported(...)` for the first refused member or unimplemented enum value in `params`
    (an operation's input, already valid against `shape`), in model member order."""
    if not _holds_refusals(shape):
        return
    t = shape.type_name
    if t == "string":
        implemented = IMPLEMENTED_VALUES.get(shape.name)
        if implemented is not None and isinstance(params, str) and params not in implemented:
            raise unsupported(f"{where} {params}".strip())
        return
    if t == "list" and isinstance(params, list):
        for item in params:
            check(shape.member, item, where)
        return
    if t == "map" and isinstance(params, Mapping):
        for value in params.values():
            check(shape.value, value, where)
        return
    if t != "structure" or not isinstance(params, Mapping):
        return
    refused = REFUSED_MEMBERS.get(shape.name, {})
    label = where or shape.name.removesuffix("Input")
    for name, member in shape.members.items():
        value = params.get(name)
        if value is None:
            continue
        if name in refused:
            raise unsupported(refused[name])
        check(member, value, f"{_label(label, shape)} {name}")


def _label(where: str, shape: botocore.model.Shape) -> str:
    """The prefix of a nested member's name in a refusal: a production variant is named as such."""
    return "ProductionVariant" if shape.name == "ProductionVariant" else where
