"""Asynchronous inference (spec §8).

[U] texts are smlocal's own choice (docs/api-coverage.md lists them); append, do not reorder.
"""

from __future__ import annotations

__all__ = [
    "async_model_not_supported",
    "async_endpoint_needs_async_invoke",
    "endpoint_not_async",
    "async_request_expired",
    "async_input_unreadable",
    "async_output_unwritable",
    "RESULT_NOT_WRITTEN",
    "async_failure_unwritable",
    "async_model_failure",
    "async_input_exactly_one",
    "async_input_not_s3",
    "async_output_not_s3",
    "serverless_from_instances",
]


def async_model_not_supported(model: str) -> str:  # [U] smlocal's own limit, for now
    return (
        f"Model {model} is a multi-model or multi-container model: smlocal serves asynchronous "
        "inference for single-container models only."
    )


def async_endpoint_needs_async_invoke(endpoint: str) -> str:  # [U]
    return (
        f"Endpoint {endpoint} is an asynchronous endpoint (its endpoint config has AsyncInferenceConfig): "
        "call InvokeEndpointAsync."
    )


def endpoint_not_async(endpoint: str) -> str:  # [U]
    return (
        f"Endpoint {endpoint} is not an asynchronous endpoint: InvokeEndpointAsync needs an endpoint "
        "config with AsyncInferenceConfig. Call InvokeEndpoint."
    )


def async_request_expired(inference_id: str, ttl_s: int) -> str:  # [U]
    return f"Inference {inference_id} expired after {ttl_s} seconds in the queue (RequestTTLSeconds)."


def async_input_unreadable(location: str, detail: str) -> str:  # [U]
    return f"Failed to download the input {location}: {detail}"


def async_output_unwritable(location: str, detail: str) -> str:  # [U]
    return f"Failed to upload the output to {location}: {detail}"


#: What every `_smlocal` line about a result that could not be written to S3 starts with (the pytest
#: fixtures' failure report picks these lines out: contract_tests/pytest_fixtures/__init__.py).
RESULT_NOT_WRITTEN = "NOT WRITTEN TO S3:"


def async_failure_unwritable(inference_id: str, location: str, detail: str) -> str:  # [U]
    return (
        f"{RESULT_NOT_WRITTEN} inference {inference_id} failed and its failure could not be written to "
        f"{location} either ({detail}): nothing will appear in S3 for it; check the server's S3 "
        "endpoint and credentials"
    )


def async_model_failure(status: int) -> str:  # [O] AWS sample code's failureReason
    return (
        f"ClientError: Received server error ({status}) from model. See the SageMaker Endpoint logs in "
        "your account for more information."
    )


def async_input_exactly_one() -> str:  # [U]
    return (
        "Provide exactly one of InputLocation and Body: the input in S3 (InputLocation) or inline "
        "(Body, up to 128000 bytes)."
    )


def async_input_not_s3(location: str) -> str:  # [U]
    return (
        f"InputLocation {location} is not an S3 object URL: smlocal reads asynchronous inputs from "
        "s3://bucket/key or https://bucket.s3.REGION.amazonaws.com/key (or "
        "https://s3.REGION.amazonaws.com/bucket/key) only."
    )


def async_output_not_s3(member: str, path: str) -> str:  # [U]
    return (
        f"AsyncInferenceConfig.OutputConfig.{member} {path} is not an S3 location: use s3://bucket/prefix "
        "or https://bucket.s3.REGION.amazonaws.com/prefix."
    )


def serverless_from_instances(endpoint: str, config: str) -> str:  # [U]; the rule is [D] spec 6.4
    return (
        f"Endpoint {endpoint} runs on instances: it cannot be updated to endpoint config {config}, whose "
        "variant is serverless. An endpoint converts from serverless to instances, not from instances "
        "to serverless: create a new endpoint with that config."
    )
