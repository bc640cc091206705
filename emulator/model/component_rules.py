"""The rules of an endpoint config for inference components (pure checks, no IO).

A production variant without ModelName provides instances for inference components: every variant
of the config must then be one [U], the config needs ExecutionRoleArn (AWS requires it: the role the
components' containers run with), each such variant an InstanceType and a count, and the config none
of the features that serve a model directly (AsyncInferenceConfig, serverless) [U].
ManagedInstanceScaling is for such variants only (SageMaker's text).
"""

from __future__ import annotations

from collections.abc import Sequence

from emulator.errors import ValidationFailed
from emulator.model import messages
from emulator.model.resources import AsyncInference, ProductionVariant


def check_endpoint_config(
    variants: Sequence[ProductionVariant],
    execution_role_arn: str | None,
    async_inference: AsyncInference | None,
) -> None:
    hosting = [v for v in variants if v.hosts_components]
    for v in variants:
        if not v.hosts_components and v.managed_instance_scaling is not None:
            raise ValidationFailed(messages.managed_scaling_needs_components())
    if not hosting:
        return
    if len(hosting) != len(variants):
        raise ValidationFailed(messages.component_variants_mixed())
    if execution_role_arn is None:
        raise ValidationFailed(messages.component_endpoint_needs_role())
    if async_inference is not None:
        raise ValidationFailed(messages.component_endpoint_refuses("AsyncInferenceConfig"))
    for v in hosting:
        if v.serverless is not None:
            raise ValidationFailed(messages.component_endpoint_refuses("ServerlessConfig"))
        if not v.instance_type:
            raise ValidationFailed(messages.component_variant_needs("an InstanceType", v.variant_name))
        managed = v.managed_instance_scaling
        if managed is not None and managed.enabled:
            low = managed.floor(v.initial_instance_count)
            high = managed.ceiling(v.initial_instance_count)
            if low > high:
                raise ValidationFailed(messages.managed_scaling_bounds(v.variant_name, low, high))
