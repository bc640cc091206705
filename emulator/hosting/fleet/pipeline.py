"""Calls into a multi-container instance: Serial (an inference pipeline) and Direct (one container
by hostname), spec §4.

Serial: the client's request goes to container 1; each container's answer (body and Content-Type)
is the next one's request; the last answer goes back to the client. Choices where SageMaker's
behaviour is not documented [U], in one place:

- the invocation budget (60 s) is end to end: each hop gets what is left of it, and a hop that
  runs past it is the timeout ModelError naming that container;
- the client's Accept goes to the last container only (the earlier ones answer in their default
  type, as SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT suggests); the custom attributes and the other
  forwarded headers go to every container; the last container's passed-back headers (its custom
  attributes) go back to the client;
- an intermediate answer over 5 MiB is a ModelError naming both containers (SageMaker's text),
  whatever its size (also over the 6 MB cap of the client's answer, which an intermediate answer
  never meets): the hop is read within 5 MiB + one read; the size named is its Content-Length, or
  "at least" the bytes read when it came chunked;
- ModelLatency is the sum of the containers' times (a fault's too, up to and with the failing hop).

Every call into a container is noted (`ContainerReply.calls`, `ModelFault.container_calls`): the
runtime handler records each container's metrics (ContainerName) from them.

A failing hop is the ModelError of that container (its hostname in the message). Only a refused
connection to the first container may be retried on another instance: a later hop's failure
comes after earlier containers did their work.
"""

from __future__ import annotations

import dataclasses
import time

from multidict import CIMultiDict

from emulator.errors import ContainerCall, ModelFault, ModelResponseTooLarge, ModelTimeout
from emulator.hosting.fleet.invoker import ContainerReply, FaultContext, Invoker, ResponseCap
from emulator.hosting.fleet.stream import ContainerStream, StreamLimits, open_stream
from emulator.hosting.fleet.variants import Instance, InstanceContainer
from emulator.model import messages

#: The largest answer one container of a pipeline may hand to the next ("5 MB": 5 MiB [U]).
MAX_INTERMEDIATE_BYTES = 5 * 1024 * 1024


async def call_direct(
    invoker: Invoker,
    container: InstanceContainer,
    body: bytes,
    headers: CIMultiDict[str],
    context: FaultContext,
) -> ContainerReply:
    try:
        reply = await invoker.invoke(container.invocations_url, body, headers, context, container.hostname)
    except ModelFault as fault:
        call = ContainerCall(container.hostname, fault.original_status, fault.model_latency_s)
        fault.container_calls = (call,)
        raise
    call = ContainerCall(container.hostname, reply.status, reply.elapsed_s)
    return dataclasses.replace(reply, calls=(call,))


class _Chain:
    """One request's way through a pipeline: the headers each hop gets, the time budget, the calls
    made so far and their summed ModelLatency."""

    def __init__(
        self, instance: Instance, headers: CIMultiDict[str], context: FaultContext, budget_s: float
    ) -> None:
        self.started = time.perf_counter()
        self.containers = instance.containers
        self.context = context
        self.budget_s = budget_s
        self.model_latency = 0.0
        self.calls: list[ContainerCall] = []
        self.headers = CIMultiDict(headers)
        self._accept = self.headers.popall("Accept", [])

    def left(self, container: InstanceContainer) -> float:
        """What is left of the budget for this hop (a hop with nothing left: the timeout fault)."""
        left = self.budget_s - (time.perf_counter() - self.started)
        if left <= 0:
            text = messages.invocation_timed_out(container.hostname)
            raise self.context.fault(ModelTimeout, 0, text, container.hostname)
        return left

    def last_hop(self) -> InstanceContainer:
        """The last container, its headers now with the client's Accept."""
        for value in self._accept:
            self.headers.add("Accept", value)
        return self.containers[-1]

    def failed(self, fault: ModelFault, container: InstanceContainer) -> ModelFault:
        self.calls.append(ContainerCall(container.hostname, fault.original_status, fault.model_latency_s))
        fault.container_calls = tuple(self.calls)
        fault.model_latency_s += self.model_latency
        return fault

    def intermediate_cap(self, i: int) -> ResponseCap:
        """Hop i's cap: what it may hand to hop i + 1, with SageMaker's text naming both."""
        source, target = self.containers[i].hostname, self.containers[i + 1].hostname
        log_group = self.context.account.log_group_arn(self.context.endpoint_name)

        def fault(status: int, size: int, exact: bool) -> ModelFault:
            text = messages.pipeline_payload_too_large(source, target, size, exact, status)
            return ModelResponseTooLarge(text, status, text, log_group)

        return ResponseCap(MAX_INTERMEDIATE_BYTES, fault)

    def answered(self, container: InstanceContainer, status: int, elapsed_s: float) -> None:
        self.model_latency += elapsed_s
        self.calls.append(ContainerCall(container.hostname, status, elapsed_s))

    async def before_last(self, invoker: Invoker, body: bytes) -> bytes:
        """Every hop but the last; returns the body for the last one."""
        context = self.context
        for i, container in enumerate(self.containers[:-1]):
            try:
                reply = await invoker.invoke(
                    container.invocations_url,
                    body,
                    self.headers,
                    context,
                    container.hostname,
                    self.left(container),
                    self.intermediate_cap(i),
                )
            except ModelFault as fault:
                fault = self.failed(fault, container)
                if i == 0:
                    raise
                raise fault from None  # never retried elsewhere: earlier containers did their work
            self.answered(container, reply.status, reply.elapsed_s)
            body = reply.body
            if reply.content_type is None:
                self.headers.popall("Content-Type", None)
            else:
                self.headers["Content-Type"] = reply.content_type
        return body


async def call_serial(
    invoker: Invoker,
    instance: Instance,
    body: bytes,
    headers: CIMultiDict[str],
    context: FaultContext,
    budget_s: float,
) -> ContainerReply:
    chain = _Chain(instance, headers, context, budget_s)
    body = await chain.before_last(invoker, body)
    last = chain.last_hop()
    try:
        reply = await invoker.invoke(
            last.invocations_url, body, chain.headers, context, last.hostname, chain.left(last)
        )
    except ModelFault as fault:
        fault = chain.failed(fault, last)
        if len(chain.containers) == 1:
            raise
        raise fault from None
    chain.answered(last, reply.status, reply.elapsed_s)
    return dataclasses.replace(reply, elapsed_s=chain.model_latency, calls=tuple(chain.calls))


async def open_serial_stream(
    invoker: Invoker,
    instance: Instance,
    body: bytes,
    headers: CIMultiDict[str],
    context: FaultContext,
    budget_s: float,
    limits: StreamLimits,
) -> ContainerStream:
    """A pipeline's answer streamed [U]: every hop but the last as InvokeEndpoint's (whole answers,
    within the invocation budget), the last one's answer streamed within the stream's limits. The
    stream's `calls_before` and `latency_before` carry the earlier hops for the metrics."""
    chain = _Chain(instance, headers, context, budget_s)
    body = await chain.before_last(invoker, body)
    last = chain.last_hop()
    try:
        stream = await open_stream(
            invoker, last.invocations_url, body, chain.headers, context, limits, last.hostname
        )
    except ModelFault as fault:
        fault = chain.failed(fault, last)
        if len(chain.containers) == 1:
            raise
        raise fault from None
    stream.calls_before = tuple(chain.calls)
    stream.latency_before = chain.model_latency
    stream.per_container = True
    return stream


async def open_direct_stream(
    invoker: Invoker,
    container: InstanceContainer,
    body: bytes,
    headers: CIMultiDict[str],
    context: FaultContext,
    limits: StreamLimits,
) -> ContainerStream:
    try:
        stream = await open_stream(
            invoker, container.invocations_url, body, headers, context, limits, container.hostname
        )
    except ModelFault as fault:
        fault.container_calls = (
            ContainerCall(container.hostname, fault.original_status, fault.model_latency_s),
        )
        raise
    stream.per_container = True
    return stream
