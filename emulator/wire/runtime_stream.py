"""InvokeEndpointWithResponseStream (rest-json): POST /endpoints/{EndpointName}/invocations-response-stream.

Up to the container's first byte it is InvokeEndpoint (runtime_api.py): the same validation, IAM
check, choices and ordinary HTTP errors (400 ValidationError, 424 ModelError). Then the answer is
`application/vnd.amazon.eventstream` (eventstream.py): each piece the container writes becomes a
PayloadPart as it arrives; a container that fails after that ends the stream with a ModelStreamError
event (StreamBroken, ModelInvocationTimeExceeded), smlocal's own failure with InternalStreamFailure.

Request headers (spec §2.4): Content-Type and X-Amzn-SageMaker-Accept (the container gets it as
Accept) and the forwarded X-Amzn-SageMaker-* ones. Response headers: X-Amzn-SageMaker-Content-Type
(the container's Content-Type), x-Amzn-Invoked-Production-Variant and the container's custom
attributes. A client that goes away mid-stream ends the container call at once: its connection is
dropped, so the container sees its client leave, and nothing of the request is left behind.
"""

from __future__ import annotations

import logging
import time
import uuid

from aiohttp import web

from emulator.errors import ModelFault, ModelStreamFault, SmlocalError
from emulator.hosting.endpoints.invoke import StreamInvocation
from emulator.hosting.endpoints.service import HostingService
from emulator.hosting.monitoring import store as m
from emulator.model import messages
from emulator.wire import eventstream
from emulator.wire.access import AccessCheck
from emulator.wire.errors import runtime_error
from emulator.wire.runtime_api import (
    VARIANT_HEADER,
    MetricHooks,
    forwarded,
    header_members,
    outcome_of,
    read_invocation,
)
from emulator.wire.service_models import SAGEMAKER_RUNTIME, operation_model

log = logging.getLogger(__name__)

_STREAM = operation_model(SAGEMAKER_RUNTIME, "InvokeEndpointWithResponseStream")
_HEADER_MEMBERS = header_members(_STREAM)
#: The stream operation's request header -> the header the container gets (spec §2.4).
FORWARDED = (
    ("Content-Type", "Content-Type"),
    ("X-Amzn-SageMaker-Accept", "Accept"),
    ("X-Amzn-SageMaker-Custom-Attributes", "X-Amzn-SageMaker-Custom-Attributes"),
    ("X-Amzn-SageMaker-Inference-Id", "X-Amzn-SageMaker-Inference-Id"),
    ("X-Amzn-SageMaker-Session-Id", "X-Amzn-SageMaker-Session-Id"),
)
EVENTSTREAM = "application/vnd.amazon.eventstream"


async def invoke_endpoint_with_response_stream(
    request: web.Request,
    svc: HostingService,
    hooks: MetricHooks | None = None,
    access: AccessCheck | None = None,
) -> web.StreamResponse:
    started = time.perf_counter()
    request_id = str(uuid.uuid4())
    component: str | None = None
    try:
        members = await read_invocation(request, svc, access, _STREAM.input_shape, _HEADER_MEMBERS)
        component = members.get("InferenceComponentName")
        forward = forwarded(request.headers, FORWARDED)
        opened = await svc.invoke_stream(
            members["EndpointName"],
            members["Body"],
            forward,
            members.get("TargetVariant"),
            members.get("TargetContainerHostname"),
            members.get("InferenceComponentName"),
        )
    except SmlocalError as exc:
        if hooks is not None and isinstance(exc, ModelFault):
            hooks.fault(request.match_info["name"], exc, started)
            hooks.component(component, outcome_of(exc.original_status), exc.model_latency_s, started)
        elif hooks is not None:
            hooks.refused(exc)
        return runtime_error(exc, request_id)
    return await _relay(request, opened, hooks, started, request_id)


def _connected(request: web.Request) -> bool:
    transport = request.transport
    return transport is not None and not transport.is_closing()


async def _relay(
    request: web.Request,
    opened: StreamInvocation,
    hooks: MetricHooks | None,
    started: float,
    request_id: str,
) -> web.StreamResponse:
    """Hand the container's answer on as event-stream messages, each piece as it arrives."""
    stream = opened.stream
    headers = {
        "Content-Type": EVENTSTREAM,
        VARIANT_HEADER: opened.variant_name,
        "x-amzn-RequestId": request_id,
        **stream.passed_back,
    }
    if stream.content_type is not None:
        headers["X-Amzn-SageMaker-Content-Type"] = stream.content_type
    resp = web.StreamResponse(headers=headers)
    resp.enable_chunked_encoding()
    outcome = m.OK
    try:
        await resp.prepare(request)
        try:
            async for piece in stream.parts(lambda: _connected(request)):
                await resp.write(eventstream.payload_parts(piece))
        except ModelStreamFault as fault:
            outcome = m.OTHER_ERROR
            log.info("stream of %s ended by the model: %s", request.match_info["name"], fault)
            await resp.write(eventstream.model_stream_error(str(fault), fault.error_code))
        if not stream.abandoned:
            await resp.write_eof()
    except ConnectionResetError:  # the client went away (aiohttp's ClientConnectionResetError)
        stream.abandoned = True
    except Exception as exc:  # noqa: BLE001 - smlocal's own failure after the stream began
        outcome = m.OTHER_ERROR
        log.exception("stream of %s failed", request.match_info["name"])
        await _fail(resp, f"{type(exc).__name__}: {exc}")
    finally:
        opened.close()
        if hooks is not None:
            hooks.stream_done(request.match_info["name"], opened.variant_name, stream, outcome, started)
            hooks.component(opened.component_name, outcome, stream.model_latency_s, started)
    return resp


async def _fail(resp: web.StreamResponse, detail: str) -> None:
    """InternalStreamFailure, if the client is still there to read it."""
    try:
        if resp.prepared:
            await resp.write(eventstream.internal_stream_failure(messages.internal_stream_failure(detail)))
            await resp.write_eof()
    except Exception:  # noqa: BLE001 - the client is gone too: nothing more to tell it
        log.debug("could not send InternalStreamFailure", exc_info=True)
