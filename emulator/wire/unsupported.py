"""What smlocal does not implement of the operations it serves, in one place: the refusal text, the
members refused wherever they appear, and the enum values smlocal implements of the enums it turns
into its own values.

botocore's models grow: a release adds a member (`PrefixAwareRoutingConfig`) or an enum value
(RoutingStrategy `PREFIX_AWARE`, `KV_AWARE`) that boto3 then sends. Such a request must never become
a 500 (boto3 retries those, three times): it is ValidationException 400
``{feature} is not supported by smlocal yet. See docs/api-coverage.md.``, answered by `check` after
the request passed botocore's own validation and before the handler parses it:

* a value of an enum in IMPLEMENTED_VALUES that is not listed there, whatever the installed model
  holds, so that a newer botocore cannot reach a domain conversion with a value smlocal has never seen;
* a member of REFUSED_MEMBERS (features smlocal does not implement);
* a member smlocal has never seen: one the installed botocore has and known_members.json (the members
  of the models smlocal was built against, per service and input structure) lacks. A newer botocore's
  member is thus refused until smlocal handles it; regenerate the file (`python3 -m
  emulator.wire.known_members`) once it does, or once it chooses to ignore it.

A member the snapshot holds that no handler reads is accepted and ignored (docs/api-coverage.md).
tests/unit/test_every_model_value.py sends every enum value and every member of the installed models
to a real server: none may be a 500.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

import botocore.model

from emulator.errors import ValidationFailed

__all__ = [
    "IMPLEMENTED_VALUES",
    "KNOWN_MEMBERS_FILE",
    "REFUSED_MEMBERS",
    "check",
    "known_members",
    "unsupported",
]

KNOWN_MEMBERS_FILE = "known_members.json"
#: The runtime operations smlocal serves (routes, not a dispatch table).
RUNTIME_OPERATIONS = ("InvokeEndpoint", "InvokeEndpointAsync", "InvokeEndpointWithResponseStream")


def unsupported(feature: str) -> ValidationFailed:
    """The one refusal text of a feature smlocal does not implement."""
    return ValidationFailed(f"{feature} is not supported by smlocal yet. See docs/api-coverage.md.")


#: enum shape name (botocore's) -> the values smlocal implements. Any other value is refused as
#: "{member path} {value}", e.g. "ProductionVariant RoutingConfig RoutingStrategy PREFIX_AWARE".
IMPLEMENTED_VALUES: dict[str, frozenset[str]] = {
    "RoutingStrategy": frozenset({"LEAST_OUTSTANDING_REQUESTS", "RANDOM"}),
    "InferenceComponentPlacementStrategy": frozenset({"SPREAD", "BINPACK"}),
}

#: structure shape name -> member -> the feature named in the refusal. Refused whenever present.
REFUSED_MEMBERS: dict[str, dict[str, str]] = {
    "CreateEndpointConfigInput": {
        "ShadowProductionVariants": "ShadowProductionVariants",
        "ExplainerConfig": "ExplainerConfig",
        "DataCaptureConfig": "DataCaptureConfig",
    },
    "ProductionVariant": {
        "InstancePools": "ProductionVariant InstancePools",
        "CapacityReservationConfig": "ProductionVariant CapacityReservationConfig",
    },
    "ProductionVariantManagedInstanceScalingScaleInPolicy": {
        "MaximumStepSize": "ProductionVariant ManagedInstanceScaling ScaleInPolicy MaximumStepSize",
        "CooldownInMinutes": "ProductionVariant ManagedInstanceScaling ScaleInPolicy CooldownInMinutes",
    },
    # inference components: one specification per component, no data cache, metrics endpoints,
    # accelerator partitions or availability-zone balance (smlocal has one zone)
    "CreateInferenceComponentInput": {"Specifications": "CreateInferenceComponent Specifications"},
    "UpdateInferenceComponentInput": {"Specifications": "UpdateInferenceComponent Specifications"},
    "InferenceComponentSpecification": {
        "DataCacheConfig": "InferenceComponent Specification DataCacheConfig",
    },
    "InferenceComponentContainerSpecification": {
        "ContainerMetricsConfig": "InferenceComponent Specification Container ContainerMetricsConfig",
    },
    "InferenceComponentComputeResourceRequirements": {
        "AcceleratorPartitionType": (
            "InferenceComponent Specification ComputeResourceRequirements AcceleratorPartitionType"
        ),
    },
    "InferenceComponentSchedulingConfig": {
        "AvailabilityZoneBalance": (
            "InferenceComponent Specification SchedulingConfig AvailabilityZoneBalance"
        ),
    },
    "ProductionVariantRoutingConfig": {
        "PrefixAwareRoutingConfig": "ProductionVariant RoutingConfig PrefixAwareRoutingConfig",
    },
}


@functools.cache
def known_members(service: str) -> dict[str, frozenset[str]]:
    """The members smlocal knows of each input structure of `service` (the snapshot in
    known_members.json, taken from the botocore models smlocal was last built against)."""
    text = resources.files("emulator.wire").joinpath(KNOWN_MEMBERS_FILE).read_text(encoding="utf-8")
    shapes = json.loads(text)["services"].get(service, {})
    return {name: frozenset(members) for name, members in shapes.items()}


def check(shape: botocore.model.Shape, params: Any, service: str, where: str = "") -> None:
    """Raise `unsupported(...)` for the first refused member, member smlocal has never seen (one a
    newer botocore added: not in known_members.json) or unimplemented enum value in `params` (an
    operation's input of `service`, already valid against `shape`), in model member order."""
    _check(shape, params, known_members(service), where)


def _check(shape: botocore.model.Shape, params: Any, known: dict[str, frozenset[str]], where: str) -> None:
    t = shape.type_name
    if t == "string":
        implemented = IMPLEMENTED_VALUES.get(shape.name)
        if implemented is not None and isinstance(params, str) and params not in implemented:
            raise unsupported(f"{where} {params}".strip())
        return
    if t == "list" and isinstance(params, list):
        for item in params:
            _check(shape.member, item, known, where)
        return
    if t == "map" and isinstance(params, Mapping):
        for value in params.values():
            _check(shape.value, value, known, where)
        return
    if t != "structure" or not isinstance(params, Mapping):
        return
    refused = REFUSED_MEMBERS.get(shape.name, {})
    seen = known.get(shape.name)  # None: a structure of a name the snapshot lacks: not judged
    label = (
        "ProductionVariant"
        if shape.name == "ProductionVariant"
        else where or shape.name.removesuffix("Input")
    )
    for name, member in shape.members.items():
        value = params.get(name)
        if value is None:
            continue
        if name in refused:
            raise unsupported(refused[name])
        if seen is not None and name not in seen and not member.metadata.get("idempotencyToken"):
            raise unsupported(f"{label} {name}")
        _check(member, value, known, f"{label} {name}")
