"""SageMaker Runtime over rest-json: POST /endpoints/{EndpointName}/invocations.

The hot path: no engine calls, no disk, no re-encoding of bodies. Header members are read with the
header names of botocore's model and validated against it; only the headers SageMaker forwards
reach the container.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from emulator.errors import (
    ContainerCall,
    ModelFault,
    NoCapacity,
    PayloadTooLarge,
    SmlocalError,
    UnknownOperation,
    ValidationFailed,
)
from emulator.hosting.endpoints.service import HostingService
from emulator.hosting.fleet.invoker import ContainerReply
from emulator.hosting.fleet.stream import ContainerStream
from emulator.hosting.monitoring import store as m
from emulator.hosting.monitoring.sampler import Sampler
from emulator.model import messages
from emulator.model.iam_access import INVOKE_ENDPOINT, INVOKE_ENDPOINT_ASYNC
from emulator.wire import unsupported
from emulator.wire.access import AccessCheck
from emulator.wire.errors import runtime_error
from emulator.wire.service_models import SAGEMAKER_RUNTIME, operation_model
from emulator.wire.validation import validate_input

_INVOKE = operation_model(SAGEMAKER_RUNTIME, "InvokeEndpoint")


def header_members(operation: Any) -> tuple[tuple[str, str], ...]:
    """(member name, HTTP header) for every header-bound member of an operation's input."""
    return tuple(
        (name, shape.serialization["name"])
        for name, shape in operation.input_shape.members.items()
        if shape.serialization.get("location") == "header"
    )


_HEADER_MEMBERS = header_members(_INVOKE)
#: Request headers SageMaker passes to the container ([U] beyond Content-Type, Accept and
#: custom attributes: see docs/api-coverage.md). Everything else is stripped.
FORWARDED = (
    "Content-Type",
    "Accept",
    "X-Amzn-SageMaker-Custom-Attributes",
    "X-Amzn-SageMaker-Inference-Id",
    "X-Amzn-SageMaker-Session-Id",
)

#: (the client's header, the container's): the same names for InvokeEndpoint.
_FORWARD = tuple((name, name) for name in FORWARDED)

VARIANT_HEADER = "x-Amzn-Invoked-Production-Variant"


def members_of(
    request: web.Request, header_members: tuple[tuple[str, str], ...] = _HEADER_MEMBERS
) -> dict[str, Any]:
    headers = request.headers
    members: dict[str, Any] = {"EndpointName": request.match_info["name"]}
    for member, header in header_members:
        value = headers.get(header)
        if value is not None:
            members[member] = value
    return members


async def read_body(request: web.Request, limit: int) -> bytes:
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(messages.request_too_large(limit))
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge as exc:
        raise PayloadTooLarge(messages.request_too_large(limit)) from exc


def check_unsupported(members: dict[str, Any], action: str) -> None:
    """An asynchronous endpoint never hosts inference components (component_rules): the header is
    refused there with the text of any endpoint without them (spec §1.8)."""
    if "InferenceComponentName" in members and action == INVOKE_ENDPOINT_ASYNC:
        raise ValidationFailed(messages.component_header_not_allowed())


#: id(input shape) -> its integer header members (InvokeEndpointAsync's RequestTTLSeconds, ...)
integer_members: dict[int, tuple[str, ...]] = {}


def register_integer_members(shape: Any) -> None:
    integer_members[id(shape)] = tuple(
        name
        for name, member in shape.members.items()
        if member.type_name == "integer" and member.serialization.get("location") == "header"
    )


async def read_invocation(
    request: web.Request,
    svc: HostingService,
    access: AccessCheck | None,
    shape: Any = _INVOKE.input_shape,
    header_members: tuple[tuple[str, str], ...] = _HEADER_MEMBERS,
    action: str = INVOKE_ENDPOINT,
) -> dict[str, Any]:
    """An invoke request's members (Body included): read within the cap, validated against the
    operation's botocore shape, authorized (`--iam-policies`: IAM decides before SageMaker's own
    checks), and SageMaker's refusals of what smlocal does not serve."""
    members = members_of(request, header_members)
    members["Body"] = await read_body(request, svc.config.limits.max_request_bytes)
    validate_input(shape, members)  # header integers are validated as the text they came as
    unsupported.check(shape, members, SAGEMAKER_RUNTIME)  # a member a newer botocore sends: 400
    for name in integer_members.get(id(shape), ()):  # ... and typed once they are valid
        value = members.get(name)
        if isinstance(value, str):
            members[name] = int(value)
    if access is not None:
        access.invoke_endpoint(request.headers, request.query, members, action)
    check_unsupported(members, action)
    return members


def forwarded(incoming: Any, names: tuple[tuple[str, str], ...]) -> CIMultiDict[str]:
    """The headers the container gets: (client's header, container's header) pairs, when present."""
    forward: CIMultiDict[str] = CIMultiDict()
    for name, to in names:
        value = incoming.get(name)
        if value is not None:
            forward[to] = value
    return forward


def outcome_of(status: int) -> int:
    if 400 <= status < 500:
        return m.CLIENT_ERROR
    if 500 <= status < 600:
        return m.SERVER_ERROR
    return m.OTHER_ERROR


class MetricHooks:
    """What the runtime handler records: SageMaker's invocation metrics for requests that reached a
    model. A fault carries the variant whose instance was called and the call's duration (set by
    hosting); the sampler (instance CPU/memory) lives here so the app can start and stop it."""

    def __init__(self, metrics: m.Metrics, sampler: Sampler | None = None) -> None:
        self.metrics = metrics
        self.sampler = sampler
        #: an inference component's copies in rotation (set by the app: the hosting service's
        #: component_load), for InvocationsPerCopy
        self.copies_of: Callable[[str], int] = lambda _name: 1

    def component(self, component: str | None, outcome: int, model_s: float, started: float) -> None:
        """An inference component's invocation metrics (dimension InferenceComponentName), besides
        its variant's."""
        if component is not None:
            total_s = time.perf_counter() - started
            self.metrics.record_component(component, self.copies_of(component), outcome, model_s, total_s)

    def refused(self, exc: SmlocalError) -> None:
        """A request refused before any model saw it: NoCapacityInvocationFailures when no copy of
        its component was in rotation."""
        if isinstance(exc, NoCapacity):
            self.metrics.record_component_value(exc.component_name, "NoCapacityInvocationFailures", 1.0)

    def fault(self, endpoint: str, exc: ModelFault, started: float) -> None:
        if exc.variant_name is None:  # hosting always sets it for a model call; defensive
            self.metrics.unattributed += 1
            return
        outcome = outcome_of(exc.original_status)
        total_s = time.perf_counter() - started
        self.metrics.record(endpoint, exc.variant_name, outcome, exc.model_latency_s, total_s)
        self._containers(endpoint, exc.variant_name, exc.container_calls, total_s - exc.model_latency_s)

    def success(self, endpoint: str, variant: str, reply: ContainerReply, started: float) -> None:
        total_s = time.perf_counter() - started
        self.metrics.record(endpoint, variant, m.OK, reply.elapsed_s, total_s)
        if reply.calls:
            self._containers(endpoint, variant, reply.calls, total_s - reply.elapsed_s)

    def stream_done(
        self, endpoint: str, variant: str, stream: ContainerStream, outcome: int, started: float
    ) -> None:
        """A response stream's end (complete, failed or left by its client): the invocation's
        metrics, ModelLatency to the last byte, and smlocal's TimeToFirstByte."""
        total_s = time.perf_counter() - started
        model_s = stream.model_latency_s
        self.metrics.record(endpoint, variant, outcome, model_s, total_s)
        self.metrics.record_first_byte(endpoint, variant, stream.first_byte_s)
        calls = stream.calls(200 if outcome == m.OK else 0)
        if calls:
            self._containers(endpoint, variant, calls, total_s - model_s)

    def _containers(
        self, endpoint: str, variant: str, calls: tuple[ContainerCall, ...], overhead_s: float
    ) -> None:
        """A multi-container request's metrics per container: each call it made, with the
        request's OverheadLatency (docs/metrics.md)."""
        for call in calls:
            outcome = m.OK if 200 <= call.status < 300 else outcome_of(call.status)
            self.metrics.record_container(
                endpoint, variant, call.hostname, outcome, call.elapsed_s, overhead_s
            )


async def invoke_endpoint(
    request: web.Request,
    svc: HostingService,
    hooks: MetricHooks | None = None,
    access: AccessCheck | None = None,
) -> web.Response:
    started = time.perf_counter()
    request_id = str(uuid.uuid4())
    component: str | None = None
    try:
        members = await read_invocation(request, svc, access)
        component = members.get("InferenceComponentName")
        body = members["Body"]
        forward = forwarded(request.headers, _FORWARD)
        result = await svc.invoke(
            members["EndpointName"],
            body,
            forward,
            members.get("TargetVariant"),
            members.get("TargetContainerHostname"),
            members.get("TargetModel"),
            request_id=request_id,
            inference_component=members.get("InferenceComponentName"),
        )
    except SmlocalError as exc:
        if hooks is not None and isinstance(exc, ModelFault):
            hooks.fault(request.match_info["name"], exc, started)
            hooks.component(component, outcome_of(exc.original_status), exc.model_latency_s, started)
        elif hooks is not None:
            hooks.refused(exc)
        return runtime_error(exc, request_id)
    reply = result.reply
    if hooks is not None:
        hooks.success(request.match_info["name"], result.variant_name, reply, started)
        hooks.component(result.component_name, m.OK, reply.elapsed_s, started)
    headers = {VARIANT_HEADER: result.variant_name, "x-amzn-RequestId": request_id, **reply.passed_back}
    if reply.content_type is not None:
        headers["Content-Type"] = reply.content_type
    return web.Response(body=reply.body, headers=headers)


async def not_implemented(request: web.Request, svc: HostingService, operation: str) -> web.Response:
    return runtime_error(UnknownOperation("SageMaker Runtime", operation), str(uuid.uuid4()))
