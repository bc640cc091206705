"""Response streaming (spec §2).

[U] texts are smlocal's own choice (docs/api-coverage.md lists them); append, do not reorder.
"""

from __future__ import annotations

__all__ = [
    "stream_time_exceeded",
    "stream_broken",
    "internal_stream_failure",
    "streaming_multi_model",
]


def stream_time_exceeded(container: str = "primary") -> str:  # [O] a re:Post report of SageMaker's text
    return f"Your model {container} did not complete sending the inference response in the allotted time."


def stream_broken(detail: str, container: str = "primary") -> str:  # [U]
    return f"Container {container} closed the connection before the end of its streamed response ({detail})."


def internal_stream_failure(detail: str) -> str:  # [U]
    return f"smlocal failed while streaming the response: {detail}. Try your request again."


def streaming_multi_model(endpoint: str) -> str:  # [U]
    return (
        f"Endpoint {endpoint} is a multi-model endpoint: InvokeEndpointWithResponseStream cannot name a "
        "TargetModel. Use InvokeEndpoint."
    )
