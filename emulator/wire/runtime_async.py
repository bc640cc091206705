"""InvokeEndpointAsync (rest-json): POST /endpoints/{EndpointName}/async-invocations.

The request is validated as InvokeEndpoint's (botocore's model, the body cap), authorized as
sagemaker:InvokeEndpointAsync (its own IAM action, not InvokeEndpoint's) and joins the endpoint's
queue; the answer is 202 at once with `{"InferenceId"}` in the body and the
X-Amzn-SageMaker-OutputLocation / -FailureLocation headers (spec §1.4). The input is read from S3
when a worker runs the request (hosting/async_inference/), or comes inline as the request's Body (at
most 128,000 bytes; exactly one of the two).
"""

from __future__ import annotations

import uuid

from aiohttp import web

from emulator.errors import SmlocalError, ValidationFailed
from emulator.hosting.endpoints.service import HostingService
from emulator.model import messages
from emulator.model.iam_access import INVOKE_ENDPOINT_ASYNC
from emulator.wire.access import AccessCheck
from emulator.wire.errors import runtime_error
from emulator.wire.runtime_api import header_members, read_invocation, register_integer_members
from emulator.wire.service_models import SAGEMAKER_RUNTIME, operation_model

_ASYNC = operation_model(SAGEMAKER_RUNTIME, "InvokeEndpointAsync")
_HEADER_MEMBERS = header_members(_ASYNC)
register_integer_members(_ASYNC.input_shape)
#: member -> the keyword of HostingService.invoke_async
_OPTIONS = {
    "ContentType": "content_type",
    "Accept": "accept",
    "CustomAttributes": "custom_attributes",
    "InferenceId": "inference_id",
    "RequestTTLSeconds": "ttl_s",
    "InvocationTimeoutSeconds": "timeout_s",
    "S3OutputPathExtension": "extension",
    "Filename": "filename",
}


async def invoke_endpoint_async(
    request: web.Request, svc: HostingService, access: AccessCheck | None = None
) -> web.Response:
    request_id = str(uuid.uuid4())
    try:
        members = await read_invocation(
            request, svc, access, _ASYNC.input_shape, _HEADER_MEMBERS, INVOKE_ENDPOINT_ASYNC
        )
        options = {kw: members[m] for m, kw in _OPTIONS.items() if m in members}
        location, body = members.get("InputLocation"), members.get("Body") or b""
        if (location is None) == (not body):  # [U] text: SageMaker's model says "provide exactly one"
            raise ValidationFailed(messages.async_input_exactly_one())
        queued = await svc.invoke_async(
            members["EndpointName"], location, inline_body=body or None, **options
        )
    except SmlocalError as exc:
        return runtime_error(exc, request_id)
    headers = {
        "X-Amzn-SageMaker-OutputLocation": queued.output_location,
        "X-Amzn-SageMaker-FailureLocation": queued.failure_location,
        "x-amzn-RequestId": request_id,
    }
    return web.json_response({"InferenceId": queued.inference_id}, status=202, headers=headers)
