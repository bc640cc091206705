"""Multi-container and multi-model endpoints (spec §4, §5).

[U] texts are smlocal's own choice (docs/api-coverage.md lists them); append, do not reorder.
"""

from __future__ import annotations

__all__ = [
    "primary_and_containers",
    "no_container",
    "direct_needs_hostnames",
    "serial_hostnames_all_or_none",
    "duplicate_hostname",
    "missing_bind_to_port_label",
    "missing_multi_models_label",
    "target_model_required",
    "target_model_not_multi_model",
    "target_model_not_found",
    "target_model_outside_prefix",
    "model_not_ready",
    "containers_failed_ping",
    "target_container_required",
    "unknown_target_container",
    "target_container_not_direct",
    "volume_size_not_supported",
    "pipeline_payload_too_large",
    "silent_on_bind_port",
]


def primary_and_containers() -> str:  # [U]
    return "Specify either PrimaryContainer or Containers, not both."


def no_container() -> str:  # [U]
    return "A model needs a PrimaryContainer or at least one entry in Containers."


def direct_needs_hostnames() -> str:  # [U]
    return (
        "ContainerHostname must be specified for every container when InferenceExecutionConfig Mode "
        "is Direct."
    )


def serial_hostnames_all_or_none() -> str:  # [U]
    return "ContainerHostname must be specified for all containers or for none of them."


def duplicate_hostname(hostname: str) -> str:  # [U]
    return (
        f"ContainerHostname {hostname} is used by more than one container. "
        "Container hostnames must be unique."
    )


def missing_bind_to_port_label(image: str) -> str:  # [D] §3.5
    return (
        f"Your Ecr Image {image} does not contain required "
        "com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true Docker label(s)."
    )


def missing_multi_models_label(image: str) -> str:  # [U] the form of the bind-to-port text (§3.5)
    return (
        f"Your Ecr Image {image} does not contain required "
        "com.amazonaws.sagemaker.capabilities.multi-models=true Docker label(s)."
    )


def target_model_required(endpoint: str) -> str:  # [U]
    return f"Endpoint {endpoint} is a multi-model endpoint: specify the TargetModel to invoke."


def target_model_not_multi_model(endpoint: str) -> str:  # [U]
    return f"TargetModel is only allowed for multi-model endpoints; endpoint {endpoint} is not one."


def target_model_not_found(bucket_or_dir: str, key: str) -> str:  # [U] the inference-component form [O]
    return (
        f"Failed to download model data (bucket: {bucket_or_dir}, key: {key}). Please ensure that there "
        "is an object located at the URL and that the role passed to CreateModel has permissions to "
        "download the model."
    )


def target_model_outside_prefix(target: str) -> str:  # [U]
    return f"TargetModel {target} must be a path relative to the model's ModelDataUrl."


def model_not_ready(target: str) -> str:  # [U]
    return (
        f"Model {target} is not ready yet: it is being downloaded and loaded. Retry the request; loading "
        "continues for up to 360 seconds."
    )


def containers_failed_ping(variant: str, hostnames: str) -> str:  # [D] the form; [U] the words around it
    return (
        f"The containers {hostnames} for production variant {variant} did not pass the ping health check. "
        "Please check CloudWatch logs for this endpoint."
    )


def target_container_required(endpoint: str) -> str:  # [U]
    return (
        f"Endpoint {endpoint} is a multi-container endpoint with Direct invocation: "
        "specify the TargetContainerHostname of the container to invoke."
    )


def unknown_target_container(hostname: str, endpoint: str) -> str:  # [U]
    return f"TargetContainerHostname {hostname} does not match any container of endpoint {endpoint}."


def target_container_not_direct(endpoint: str) -> str:  # [U]
    return (
        f"TargetContainerHostname is only allowed for multi-container endpoints with Direct invocation; "
        f"endpoint {endpoint} is not one."
    )


def volume_size_not_supported(instance_type: str) -> str:  # [U]; the SDK's rule, SageMaker's words unseen
    return (
        f"VolumeSizeInGB is not supported for instance type {instance_type}: its instances have "
        "instance storage (NVMe), which SageMaker uses instead of an EBS volume."
    )


def pipeline_payload_too_large(
    source: str, target: str, size: int, exact: bool = True, status: int = 200
) -> str:  # [D] 2023 text; [U] "at least" for an answer of unknown length (chunked)
    amount = f"{size} bytes" if exact else f"at least {size} bytes"
    return (
        f"Received response from {source} with status code {status}. However, the request payload from "
        f"{source} to {target} is {amount}, which has exceeded the maximum limit of 5 MB."
    )


def silent_on_bind_port(told: list[tuple[str, int]], default_port_answers: bool) -> str:  # [U]
    """Appended to containers_failed_ping: the containers that gave no HTTP answer on the port they
    were told, and whether a server of the instance answers on 8080 instead (an image that ignores
    SAGEMAKER_BIND_TO_PORT; issue 24 item 8)."""
    text = "".join(
        f" The container {hostname} was told SAGEMAKER_BIND_TO_PORT={port}; nothing answered HTTP there."
        for hostname, port in told
    )
    if default_port_answers:
        text += (
            " A server of the instance answers on port 8080, which no container was told: a container of "
            "a multi-container model must listen on the port in SAGEMAKER_BIND_TO_PORT instead of 8080."
        )
    return text
