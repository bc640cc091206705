"""Application Auto Scaling, deployments and tags (spec §6, §9).

[U] texts are smlocal's own choice (docs/api-coverage.md lists them); append, do not reorder.
"""

from __future__ import annotations

__all__ = [
    "no_scalable_target",
    "no_scaling_policy",
    "unsupported_scalable_target",
    "capacities_required",
    "min_above_max",
    "endpoint_not_in_service",
    "scaling_endpoint_not_found",
    "scaling_variant_not_found",
    "predefined_metric_unsupported",
    "policy_configuration_required",
    "autoscaled_variant_update",
    "rolling_needs_same_variants",
    "rolled_back",
    "rollback_failed",
    "no_tagged_resource",
    "too_many_tags",
    "unsupported_component_target",
    "scaling_component_not_found",
    "component_not_in_service",
]


def no_scalable_target(target: str) -> str:
    """`target`: "service namespace: ..., resource ID: ..., scalable dimension: ..."."""
    return f"No scalable target registered for {target}"


def no_scaling_policy(target: str, policy_name: str) -> str:
    return f"No scaling policy found for {target}, policy name: {policy_name}"


def unsupported_scalable_target() -> str:
    return (
        "Unsupported service namespace, resource type or scalable dimension. smlocal scales the "
        "sagemaker namespace's endpoint/{EndpointName}/variant/{VariantName} resources in the "
        "sagemaker:variant:DesiredInstanceCount dimension (and serverless variants in "
        "sagemaker:variant:DesiredProvisionedConcurrency)."
    )


def capacities_required() -> str:  # [U]
    return "MinCapacity and MaxCapacity are required for registering a new scalable target"


def min_above_max() -> str:
    return "Minimum capacity cannot be greater than maximum capacity"


def endpoint_not_in_service(endpoint: str, status: str) -> str:  # [O] the second sentence; [U] the first
    return (
        f"Endpoint {endpoint} is in {status} status. "
        "The status should be in 'InService' to register it as a scalable target."
    )


def scaling_endpoint_not_found(endpoint: str) -> str:  # [U]
    return f"The endpoint {endpoint} does not exist."


def scaling_variant_not_found(variant: str, endpoint: str) -> str:  # [U]
    return f"The variant {variant} does not exist in endpoint {endpoint}."


def predefined_metric_unsupported(dimension: str, supported: str) -> str:
    return f"Scalable dimension {dimension} only supports the following predefined metric types: {supported}"


def policy_configuration_required(policy_type: str, member: str) -> str:  # [U]
    return f"{member} is required for the {policy_type} policy type."


def autoscaled_variant_update(variant: str, endpoint: str) -> str:  # [U]
    return (
        f"The variant {variant} of endpoint {endpoint} is registered with Application Auto Scaling. "
        "Deregister its scalable target before you remove the variant or change its instance type."
    )


def rolling_needs_same_variants() -> str:  # [U]
    return (
        "A RollingUpdatePolicy replaces the instances of existing variants: the new endpoint "
        "configuration must have the same variant names. Add or remove variants with a "
        "BlueGreenUpdatePolicy."
    )


def rolled_back(reason: str) -> str:  # [U]
    return f"The update was rolled back because {reason}. The endpoint serves its previous configuration."


def rollback_failed(reason: str) -> str:  # [U]
    return f"The update failed and its rollback failed too: {reason}. Instances of both configurations serve."


def no_tagged_resource(arn: str) -> str:  # [U]
    return f"No scalable target found for the resource ARN {arn}"


def too_many_tags(arn: str, limit: int) -> str:  # [U]
    return f"The resource {arn} would have more than {limit} tags."


def unsupported_component_target() -> str:  # [U]
    return (
        "Unsupported resource ID or scalable dimension for an inference component. smlocal scales "
        "inference-component/{InferenceComponentName} resources in the "
        "sagemaker:inference-component:DesiredCopyCount dimension."
    )


def scaling_component_not_found(component: str) -> str:  # [U]
    return f"The inference component {component} does not exist."


def component_not_in_service(component: str, status: str) -> str:  # [U] (after the endpoint's text)
    return (
        f"Inference component {component} is in {status} status. "
        "The status should be in 'InService' to register it as a scalable target."
    )
