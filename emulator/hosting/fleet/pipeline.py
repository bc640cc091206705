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
- an intermediate answer over 5 MiB is a ModelError naming both containers (SageMaker's text);
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
from emulator.hosting.fleet.invoker import ContainerReply, FaultContext, Invoker
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


async def call_serial(
    invoker: Invoker,
    instance: Instance,
    body: bytes,
    headers: CIMultiDict[str],
    context: FaultContext,
    budget_s: float,
) -> ContainerReply:
    started = time.perf_counter()
    model_latency = 0.0
    calls: list[ContainerCall] = []
    containers = instance.containers
    hop_headers = CIMultiDict(headers)
    accept = hop_headers.popall("Accept", [])
    for i, container in enumerate(containers):
        last = i == len(containers) - 1
        if last:
            for value in accept:
                hop_headers.add("Accept", value)
        left = budget_s - (time.perf_counter() - started)
        try:
            if left <= 0:
                fault = context.fault(
                    ModelTimeout, 0, messages.invocation_timed_out(container.hostname), container.hostname
                )
                raise fault
            reply = await invoker.invoke(
                container.invocations_url, body, hop_headers, context, container.hostname, left
            )
        except ModelFault as fault:
            calls.append(ContainerCall(container.hostname, fault.original_status, fault.model_latency_s))
            fault.container_calls = tuple(calls)
            fault.model_latency_s += model_latency
            if i == 0:
                raise
            raise fault from None  # never retried elsewhere: earlier containers did their work
        model_latency += reply.elapsed_s
        calls.append(ContainerCall(container.hostname, reply.status, reply.elapsed_s))
        if last:
            return dataclasses.replace(reply, elapsed_s=model_latency, calls=tuple(calls))
        if len(reply.body) > MAX_INTERMEDIATE_BYTES:
            nxt = containers[i + 1].hostname
            text = messages.pipeline_payload_too_large(container.hostname, nxt, len(reply.body))
            too_large = ModelResponseTooLarge(
                text, reply.status, text, context.account.log_group_arn(context.endpoint_name)
            )
            too_large.model_latency_s = model_latency
            too_large.container_calls = tuple(calls)
            raise too_large
        body = reply.body
        if reply.content_type is None:
            hop_headers.popall("Content-Type", None)
        else:
            hop_headers["Content-Type"] = reply.content_type
    raise AssertionError("a pipeline has at least one container")
