"""SageMaker's texts for resources, containers and invocations (spec §1.8, §6.8, §11.3).

[U] texts are smlocal's own choice (docs/api-coverage.md lists them); append, do not reorder.
"""

from __future__ import annotations

__all__ = [
    "not_found",
    "already_exists",
    "in_progress",
    "runtime_endpoint_not_found",
    "unknown_variant",
    "unknown_variant_update",
    "image_not_found",
    "cannot_start_container",
    "ping_health_check_failed",
    "model_error",
    "invocation_timed_out",
    "response_too_large",
    "container_unreachable",
    "connection_refused",
    "closed_before_status_line",
    "dropped_in_flight",
    "closed_mid_response",
    "request_too_large",
    "instance_limit_exceeded",
]

_KIND_NAMES = {"model": "model", "endpoint-config": "endpoint configuration", "endpoint": "endpoint"}


def not_found(kind: str, arn: str) -> str:
    return f'Could not find {_KIND_NAMES[kind]} "{arn}".'


def already_exists(kind: str, arn: str) -> str:
    return f'Cannot create already existing {_KIND_NAMES[kind]} "{arn}".'


def in_progress(endpoint_arn: str) -> str:
    return f'Cannot update in-progress endpoint "{endpoint_arn}".'


def runtime_endpoint_not_found(name: str, account_id: str) -> str:
    return f"Endpoint {name} of account {account_id} not found."


def unknown_variant(variant: str, endpoint: str) -> str:  # [U]
    return f"Variant {variant} not found for endpoint {endpoint}."


def unknown_variant_update(variant: str, endpoint: str) -> str:  # [U]
    return f"The variant {variant} does not exist in endpoint {endpoint}."


def image_not_found(image: str) -> str:  # [U]: SageMaker's own text names the role; we have none
    return (
        f"Requested image {image} not found. smlocal resolves images on the local Docker engine: "
        "build or tag it there first."
    )


def cannot_start_container(variant: str) -> str:
    return (
        "CannotStartContainerError. Please ensure the model container for variant "
        f"{variant} starts correctly when invoked with 'docker run <image> serve'"
    )


def ping_health_check_failed(variant: str) -> str:
    return (
        f"The primary container for production variant {variant} did not pass the ping health check. "
        "Please check CloudWatch logs for this endpoint."
    )


def model_error(status: int, body: str, console_url: str, account_id: str, container: str = "primary") -> str:
    kind = "client" if 400 <= status < 500 else "server"
    return (
        f'Received {kind} error ({status}) from {container} with message "{body}". '
        f"See {console_url} in account {account_id} for more information."
    )


def invocation_timed_out(container: str = "primary") -> str:
    return (
        f"Your invocation timed out while waiting for a response from container {container}. "
        "Review the latency metrics for each container in Amazon CloudWatch, resolve the issue, "
        "and try again."
    )


def response_too_large(limit: int, container: str = "primary") -> str:  # [U]
    return f"The response from container {container} exceeded the maximum payload size of {limit} bytes."


def container_unreachable(reason: str, container: str = "primary") -> str:  # [U]
    return f"Could not get a response from container {container}: {reason}."


def connection_refused(detail: str, container: str = "primary") -> str:  # [U]
    return f"Could not connect to container {container}: the connection was refused ({detail})."


def dropped_in_flight(detail: str, container: str = "primary", exit_code: int | None = None) -> str:  # [U]
    what = "exited or was stopped" if exit_code is None else f"exited with code {exit_code}"
    return (
        f"Container {container} dropped the connection while the request was in flight and no longer "
        f"accepts connections: the container {what} ({detail})."
    )


def closed_before_status_line(detail: str, container: str = "primary") -> str:  # [U]
    return (
        f"Container {container} closed the connection before sending an HTTP status line: its server "
        f"may have died or nothing listens on port 8080 ({detail})."
    )


def closed_mid_response(detail: str, container: str = "primary") -> str:  # [U]
    return f"Container {container} closed the connection before the whole response was sent ({detail})."


def request_too_large(limit: int) -> str:  # [O] 2018 text, with today's limit
    return f"HTTP content length exceeded {limit} bytes."


def instance_limit_exceeded(instance_type: str, limit: int, current: int, delta: int) -> str:
    """[O] spec §11.3 (its first sentence); the rest as SageMaker's answers read in users' logs."""
    return (
        f"The account-level service limit '{instance_type} for endpoint usage' is {limit} Instances, with "
        f"current utilization of {current} Instances and a request delta of {delta} Instances. Please use "
        "AWS Service Quotas to request an increase for this quota. If AWS Service Quotas is not available, "
        "contact AWS support to request an increase for this quota."
    )
