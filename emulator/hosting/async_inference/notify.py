"""Asynchronous inference's SNS notifications: the success and error messages SageMaker publishes
(spec §8), built here and published through boto3's SNS client on the async I/O pool.

A publish that fails is counted (NotificationFailures) and logged; the result in S3 stands.
`IncludeInferenceResponseIn` adds the model's answer to the message when it fits [U: SageMaker's
limit is 128 KB of response; smlocal base64-encodes it as `responseBody`].
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

from emulator.hosting.async_inference.queue import AsyncRequest

#: The largest answer a notification carries (SageMaker: 128 KB).
MAX_INCLUDED_RESPONSE_BYTES = 128 * 1024
SUCCESS = "SUCCESS_NOTIFICATION_TOPIC"
ERROR = "ERROR_NOTIFICATION_TOPIC"


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def message(
    request: AsyncRequest,
    endpoint: str,
    region: str,
    now: float,
    *,
    failure_reason: str | None = None,
    content_type: str | None = None,
    response: bytes | None = None,
) -> dict[str, Any]:
    """The notification of one finished request: Completed (no failure_reason) or Failed."""
    completed = failure_reason is None
    out: dict[str, Any] = {
        "awsRegion": region,
        "eventTime": _iso(now),
        "receivedTime": _iso(request.received_at),
        "invocationStatus": "Completed" if completed else "Failed",
        "requestParameters": {
            "contentType": request.content_type or "application/octet-stream",
            "endpointName": endpoint,
            "inputLocation": request.input_location,
        },
        "responseParameters": {
            "contentType": content_type or ("application/octet-stream" if completed else "text/plain"),
            **(
                {"outputLocation": request.output_location}
                if completed
                else {"failureLocation": request.failure_location}
            ),
        },
        "inferenceId": request.inference_id,
        "eventVersion": "1.0",
        "eventSource": "aws:sagemaker",
        "eventName": "InferenceResult",
    }
    if failure_reason is not None:
        out["failureReason"] = failure_reason
    if response is not None and len(response) <= MAX_INCLUDED_RESPONSE_BYTES:
        out["responseBody"] = {"content": base64.b64encode(response).decode(), "encoding": "BASE64"}
    return out


def encode(document: dict[str, Any]) -> str:
    return json.dumps(document, separators=(",", ":"))
