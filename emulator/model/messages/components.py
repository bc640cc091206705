"""Inference components (issue 26).

[U] texts are smlocal's own choice (SageMaker publishes no text for these); append, do not reorder.
"""

from __future__ import annotations

__all__ = [
    "copy_needs_cpus",
    "copy_needs_memory",
    "copy_needs_accelerators",
    "managed_scaling_needs_components",
    "components_not_supported",
    "component_endpoint_needs_role",
    "component_variants_mixed",
    "component_variant_needs",
    "component_endpoint_refuses",
    "managed_scaling_bounds",
    "endpoint_has_components",
    "component_not_found",
    "component_in_progress",
    "component_copy_never_fits",
    "component_needs_compute",
    "component_copy_count_at_create",
    "component_header_missing",
    "component_header_not_allowed",
    "component_not_on_endpoint",
    "component_no_capacity",
    "endpoint_not_in_service_for_component",
    "component_unknown_variant",
    "component_model_not_supported",
    "component_not_serving",
    "component_copy_count_negative",
    "component_update_to_adapter",
    "component_endpoint_update_not_yet",
    "component_update_no_room",
    "component_model_gone",
    "component_needs_specification",
    "component_needs_model",
    "component_model_and_container",
    "component_needs_variant",
    "adapter_base_not_found",
    "adapter_base_not_in_service",
    "adapter_needs_artifact",
    "adapter_has_compute",
    "adapter_refused",
    "component_has_adapters",
    "adapter_not_in_service",
]


def copy_needs_cpus(needed: float, instance_type: str, has: float) -> str:  # [U]
    """One copy asks for more CPU cores than a whole instance of the type has."""
    return f"needs {needed} CPU cores, {instance_type} has {has:g}"


def copy_needs_memory(needed_mb: int, instance_type: str, has_mb: int) -> str:  # [U]
    """One copy's MinMemoryRequiredInMb is more than a whole instance of the type has."""
    return f"needs {needed_mb} MB of memory, {instance_type} has {has_mb}"


def copy_needs_accelerators(needed: int, instance_type: str, has: int) -> str:  # [U]
    """One copy asks for more accelerator devices than a whole instance of the type has."""
    devices = "device" if needed == 1 else "devices"
    return f"needs {needed} accelerator {devices}, {instance_type} has {has}"


def managed_scaling_needs_components() -> str:
    """[O] terraform-provider-aws #45926: ManagedInstanceScaling on a variant that names a model."""
    return "ManagedInstanceScaling is only supported for inference component endpoints."


def components_not_supported() -> str:
    """[O] terraform-provider-aws #40644: CreateInferenceComponent on an endpoint serving a model."""
    return (
        "Invalid request provided: Inference Components are not supported in this Endpoint. "
        "Please make sure this endpoint can deploy inference components."
    )


def component_endpoint_needs_role() -> str:  # [U] AWS requires it (terraform-provider-aws #44977)
    return (
        "ExecutionRoleArn is required for an endpoint config whose production variants name no "
        "ModelName (an endpoint for inference components)."
    )


def component_variants_mixed() -> str:  # [U]
    return (
        "Either every production variant of an endpoint config names a ModelName, or none does "
        "(an endpoint for inference components)."
    )


def component_variant_needs(what: str, variant: str) -> str:  # [U]
    return f"Production variant {variant} hosts inference components: it needs {what}."


def component_endpoint_refuses(feature: str) -> str:  # [U]
    return f"{feature} is not supported for an endpoint for inference components."


def managed_scaling_bounds(variant: str, low: int, high: int) -> str:  # [U]
    return (
        f"ManagedInstanceScaling of production variant {variant}: MinInstanceCount ({low}) must not be "
        f"more than MaxInstanceCount ({high})."
    )


def endpoint_has_components(endpoint_arn: str, names: str) -> str:  # [U]
    return (
        f'Cannot delete endpoint "{endpoint_arn}": it hosts inference components ({names}). '
        "Delete them (DeleteInferenceComponent) first."
    )


def component_not_found(arn: str) -> str:  # the form of the other resources' texts
    return f'Could not find inference component "{arn}".'


def component_in_progress(arn: str, status: str) -> str:  # [U]
    return f'Cannot update in-progress inference component "{arn}" (status {status}).'


def component_copy_never_fits(name: str, why: str) -> str:  # [U]
    return f"A copy of inference component {name} fits no instance: {why}."


def component_needs_compute(name: str) -> str:  # [U]
    return (
        f"Inference component {name} needs ComputeResourceRequirements with MinMemoryRequiredInMb "
        "(unless it names a BaseInferenceComponentName)."
    )


def component_copy_count_at_create() -> str:  # [O] stdapi-ai issue #43
    return "Inference components copy count an integer larger than 0"


def component_header_missing() -> str:  # [O] spec §1.8
    return (
        "Inference Component Name header is required for endpoints to which you plan to deploy "
        "inference components. Please include Inference Component Name header or consider using "
        "SageMaker models."
    )


def component_header_not_allowed() -> str:  # [O] spec §1.8
    return (
        "Inference Component Name header is not allowed for endpoints to which you dont plan to deploy "
        "inference components. Please remove the Inference Component Name header and try again."
    )


def component_not_on_endpoint(name: str, endpoint: str) -> str:  # [U]
    return f"Inference component {name} is not deployed on endpoint {endpoint}."


def component_no_capacity(name: str) -> str:  # [U] recalled, not verified
    return f"Inference Component {name} has no capacity to process this request."


def endpoint_not_in_service_for_component(endpoint: str) -> str:  # [U]
    return f"Endpoint {endpoint} is not InService: inference components are deployed to serving endpoints."


def component_unknown_variant(variant: str, endpoint: str) -> str:  # [U]
    return f"The variant {variant} does not exist on endpoint {endpoint}."


def component_model_not_supported(model: str) -> str:  # [U]
    return (
        f"Model {model} has several containers or serves many models: an inference component "
        "runs one container of one model."
    )


def component_not_serving(name: str, status: str) -> str:  # [U]
    return f"Inference component {name} is {status}: it cannot be updated (delete it and create it again)."


def component_copy_count_negative() -> str:  # [U]
    return "CopyCount must not be negative."


def component_update_to_adapter(name: str) -> str:  # [U]
    return (
        f"UpdateInferenceComponent cannot give {name} a BaseInferenceComponentName: create the "
        "adapter as a component of its own."
    )


def component_endpoint_update_not_yet() -> str:  # the one refusal text of wire/unsupported.py
    return (
        "UpdateEndpoint of an endpoint for inference components is not supported by smlocal yet. "
        "See docs/api-coverage.md."
    )


def component_update_no_room(name: str, pending: int) -> str:  # [U]
    return f"No instance has room for {pending} more copies of {name} during the update."


def component_model_gone(model: str, name: str) -> str:  # [U]
    return f"Model {model} of inference component {name} no longer exists."


def component_needs_specification() -> str:  # [U]
    """CreateInferenceComponent without Specification (optional in the model since Specifications)."""
    return "CreateInferenceComponent needs a Specification."


def component_needs_model() -> str:  # [U]
    """A Specification that says neither what to run nor whose adapter it is."""
    return (
        "An inference component's Specification needs a ModelName or a Container with an Image "
        "(unless it names a BaseInferenceComponentName)."
    )


def component_model_and_container() -> str:  # [U]
    """ModelName and Container both given: two answers to what the copies run."""
    return "An inference component's Specification names a ModelName or a Container, not both."


def component_needs_variant() -> str:  # [U] VariantName is optional in the model
    return (
        "CreateInferenceComponent needs a VariantName: the production variant of the endpoint its "
        "copies are placed on (only an adapter, which names a BaseInferenceComponentName, may omit it)."
    )


def adapter_base_not_found(base: str, endpoint: str) -> str:  # [U]
    return f"BaseInferenceComponentName {base} names no inference component of endpoint {endpoint}."


def adapter_base_not_in_service(base: str, status: str) -> str:  # [U]
    return f"The base inference component {base} is {status}: adapters are loaded into a serving one."


def adapter_needs_artifact(name: str) -> str:  # [U] AWS: the adapter's location is Container.ArtifactUrl
    return f"Adapter inference component {name} needs Container.ArtifactUrl (where its adapter is)."


def adapter_has_compute(name: str) -> str:  # [U] AWS: an adapter uses its base's compute
    return f"Adapter inference component {name} uses its base's compute: omit ComputeResourceRequirements."


def adapter_refused(adapter: str, base: str, copy: str, status: int, answer: str) -> str:  # [U]
    code = f"HTTP {status}" if status else "no answer"
    return (
        f"A copy of {base} ({copy}) did not load adapter {adapter}: POST /adapters got {code}: "
        f"{answer.strip()[:300]}"
    )


def component_has_adapters(base: str, names: str) -> str:  # [U]
    return f"Inference component {base} is the base of adapters ({names}): delete them first."


def adapter_not_in_service(name: str, status: str) -> str:  # [U]
    return f"Adapter inference component {name} is {status}: it serves once InService."
