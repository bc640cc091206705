"""The invocation's routing headers, checked against the variant that serves it: TargetModel (multi-model
endpoints only) and TargetContainerHostname (Direct multi-container endpoints only), spec §4-5."""

from __future__ import annotations

from emulator.errors import ValidationFailed
from emulator.hosting.fleet.variants import VariantFleet
from emulator.model import messages


def check_target_model(endpoint_name: str, variant: VariantFleet, target: str | None) -> None:
    """TargetModel: required on a multi-model endpoint, refused anywhere else, a relative path."""
    multi_model = variant.plan is not None and variant.plan.model.multi_model
    if not multi_model:
        if target is not None:
            raise ValidationFailed(messages.target_model_not_multi_model(endpoint_name))
        return
    if target is None:
        raise ValidationFailed(messages.target_model_required(endpoint_name))
    if target.startswith("/") or ".." in target.split("/"):  # [U] never outside the prefix
        raise ValidationFailed(messages.target_model_outside_prefix(target))


def check_target_container(endpoint_name: str, variant: VariantFleet, target: str | None) -> None:
    """TargetContainerHostname: required on a Direct endpoint and naming one of its containers;
    refused anywhere else (spec §4)."""
    model = variant.plan.model if variant.plan is not None else None
    direct = model is not None and model.direct
    if not direct:
        if target is not None:
            raise ValidationFailed(messages.target_container_not_direct(endpoint_name))
        return
    if target is None:
        raise ValidationFailed(messages.target_container_required(endpoint_name))
    assert model is not None
    if target not in model.hostnames():
        raise ValidationFailed(messages.unknown_target_container(target, endpoint_name))
