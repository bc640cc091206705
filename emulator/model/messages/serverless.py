"""Serverless inference (spec §7).

[U] texts are smlocal's own choice (docs/api-coverage.md lists them); append, do not reorder.
"""

from __future__ import annotations

__all__ = [
    "serverless_memory_size",
    "serverless_provisioned_over_max",
    "serverless_with_instances",
    "serverless_gpu",
    "serverless_several_variants",
    "serverless_async",
    "serverless_model_not_supported",
    "serverless_network_isolation",
    "serverless_model_data_source",
    "serverless_oversize",
    "serverless_throttled",
    "serverless_out_of_memory",
    "serverless_cold_start_failed",
    "serverless_instance_count",
    "serverless_streaming",
    "serverless_not_instance_scalable",
    "serverless_image_too_large",
    "serverless_update_not_serverless",
    "not_provisioned_scalable",
    "provisioned_capacity_range",
]


def serverless_memory_size(value: int, allowed: tuple[int, ...]) -> str:  # [U]
    listed = ", ".join(str(a) for a in allowed)
    return f"MemorySizeInMB {value} is not supported for a serverless endpoint: choose one of {listed}."


def serverless_provisioned_over_max(variant: str, provisioned: int, maximum: int) -> str:  # [U]
    return (
        f"ProvisionedConcurrency ({provisioned}) of variant {variant} must be less than or equal to its "
        f"MaxConcurrency ({maximum})."
    )


def serverless_with_instances(variant: str) -> str:  # [U]
    return (
        f"Variant {variant} has a ServerlessConfig: it cannot also have InstanceType or InitialInstanceCount."
    )


def serverless_gpu(variant: str, instance_type: str) -> str:  # [U]; GPUs are not supported (spec §7)
    return (
        f"Serverless endpoints do not support GPUs: variant {variant} names instance type "
        f"{instance_type}. Remove InstanceType."
    )


def serverless_several_variants() -> str:  # [U]; one variant only (spec §7)
    return "An endpoint config with a serverless production variant can have only one production variant."


def serverless_async() -> str:  # [U]
    return "An endpoint config with a serverless production variant cannot have an AsyncInferenceConfig."


def serverless_model_not_supported(model: str, kind: str) -> str:  # [U]; spec §7
    return (
        f"Model {model} is a {kind} model: serverless endpoints support neither multi-model endpoints "
        "nor inference pipelines (models of several containers)."
    )


def serverless_network_isolation(model: str) -> str:  # [U]; spec §7
    return f"Model {model} has EnableNetworkIsolation: serverless endpoints do not support network isolation."


def serverless_model_data_source(model: str) -> str:  # [U]; ModelDataSource is not supported [M]
    return (
        f"Model {model} uses a ModelDataSource: serverless endpoints need model data given as one "
        "ModelDataUrl (a .tar.gz)."
    )


def serverless_oversize(request_id: str) -> str:  # [O] aws/sagemaker-python-sdk#4271
    return f"Request {request_id} has oversize body."


def serverless_throttled(endpoint: str, max_concurrency: int) -> str:  # [U]; AWS's message is unseen
    return (
        f"Endpoint {endpoint} is serving its MaxConcurrency of {max_concurrency} concurrent invocations: "
        "the request was throttled. Retry it later or raise MaxConcurrency."
    )


def serverless_out_of_memory(memory_size_mb: int) -> str:  # [U]
    return (
        f"The container used more than the endpoint's MemorySizeInMB ({memory_size_mb} MB) and was "
        "stopped (out of memory)."
    )


def serverless_cold_start_failed(reason: str) -> str:  # [U]
    return f"The serverless endpoint could not start its model container: {reason}"


def serverless_instance_count(variant: str) -> str:  # [U]
    return (
        f"Variant {variant} is serverless: it has no instance count to update. Use a new endpoint config "
        "to change its ServerlessConfig."
    )


def serverless_streaming(endpoint: str) -> str:  # [U] smlocal's own limit
    return (
        f"Endpoint {endpoint} is a serverless endpoint: smlocal does not serve "
        "InvokeEndpointWithResponseStream on serverless endpoints. Use InvokeEndpoint."
    )


def serverless_not_instance_scalable(variant: str, endpoint: str) -> str:  # [U]
    return (
        f"Variant {variant} of endpoint {endpoint} is serverless: it has no "
        "sagemaker:variant:DesiredInstanceCount to scale. Scale its "
        "sagemaker:variant:DesiredProvisionedConcurrency instead."
    )


def serverless_image_too_large(image: str, size: int, limit: int) -> str:  # [U]
    return (
        f"The image {image} is {size / 1024**3:.2f} GB ({size} bytes): serverless endpoints support images "
        f"of up to {limit / 1024**3:.2f} GB ({limit} bytes). Reduce the image size or deploy to instances."
    )


def serverless_update_not_serverless(variant: str) -> str:  # [U]
    return f"Variant {variant} is not serverless: ServerlessUpdateConfig applies to serverless variants only."


def not_provisioned_scalable(variant: str, endpoint: str) -> str:  # [U]
    return (
        f"Variant {variant} of endpoint {endpoint} has no ProvisionedConcurrency: only a serverless variant "
        "with ProvisionedConcurrency can be scaled in sagemaker:variant:DesiredProvisionedConcurrency."
    )


def provisioned_capacity_range(
    variant: str, max_concurrency: int, min_capacity: int, max_capacity: int
) -> str:
    # [U] ProvisionedConcurrency must stay within 1..MaxConcurrency (spec §7)
    return (
        f"MinCapacity ({min_capacity}) and MaxCapacity ({max_capacity}) of a "
        "sagemaker:variant:DesiredProvisionedConcurrency target must be between 1 and the MaxConcurrency "
        f"({max_concurrency}) of variant {variant}."
    )
