"""InvokeEndpoint inside the hosting service: the endpoint's fleet, the variant (TargetVariant or
by weight), the instance (the variant's picker) and one container call through the Invoker, made once
more only when its connection was never made.

The invoke path's one entry is `Invocations.invoke`: in, the endpoint name, the body, the headers and
TargetVariant (from wire/runtime_api.py); out, an Invocation (the container's whole reply and the
variant that answered) or a ModelFault naming the variant. The HTTP call and its faults are
fleet/invoker.py's, the choice of instance the variant's (fleet/variants.py). On a multi-container
endpoint, TargetContainerHostname is checked here (Direct: required and known; otherwise refused)
and the calls into an instance's containers are fleet/pipeline.py's (Direct: the one container;
Serial: the chain). `invoke_stream` is InvokeEndpointWithResponseStream's path: the same choices,
then the container's answer handed on as it is written (fleet/stream.py)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from emulator.errors import (
    EndpointNotFound,
    ModelFault,
    ModelResponseTooLarge,
    ModelUnreachable,
    NoCapacity,
    ValidationFailed,
)
from emulator.hosting.async_inference.queue import AsyncRequest
from emulator.hosting.endpoints.base import ServiceBase
from emulator.hosting.endpoints.restoring import serving_fleet
from emulator.hosting.endpoints.targets import check_target_container, check_target_model
from emulator.hosting.fleet import pipeline
from emulator.hosting.fleet.invoker import ContainerReply, FaultContext, with_exit_code
from emulator.hosting.fleet.stream import ContainerStream, StreamLimits, open_stream
from emulator.hosting.fleet.variants import EndpointFleet, Instance, VariantFleet
from emulator.hosting.multi_model.host import STOPPED_WHILE_LOADING, TARGET_MODEL_HEADER, InstanceStopped
from emulator.model import messages, serverless
from emulator.model.components import ADAPTER_HEADER, ComponentStatus
from emulator.model.resources import EndpointStatus

_T = TypeVar("_T")


class NoInstanceInRotation(ModelUnreachable):
    """No instance of the variant was in rotation (every one out, being replaced): the request
    reached no container, so a serverless variant may start one and try it there."""


@dataclass(frozen=True)
class Invocation:
    reply: ContainerReply
    variant_name: str
    #: the inference component that answered (None on any other endpoint)
    component_name: str | None = None


@dataclass
class StreamInvocation:
    """A streamed answer under way: its container stream and the variant that answers. `close`
    (once, always) ends the container call and the instance's count of it."""

    stream: ContainerStream
    variant_name: str
    instance: Instance
    closed: bool = False
    #: the inference component that answers (None on any other endpoint)
    component_name: str | None = None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.stream.close()
            self.instance.outstanding -= 1


class Invocations(ServiceBase):
    async def invoke(
        self,
        endpoint_name: str,
        body: bytes,
        headers: CIMultiDict[str],
        target_variant: str | None,
        target_container: str | None = None,
        target_model: str | None = None,
        request_id: str = "",
        inference_component: str | None = None,
    ) -> Invocation:
        fleet = await self._endpoint_fleet(endpoint_name)
        component = await self._component(fleet, endpoint_name, inference_component)
        if component is not None:
            headers = self._adapter_headers(inference_component, headers)
            try:
                reply = await self._call(endpoint_name, component, body, headers)
            except ModelFault as fault:
                fault.variant_name = component.variant.variant_name
                raise
            return Invocation(reply, component.variant.variant_name, inference_component)
        variant = await self._variant(endpoint_name, target_variant, target_container, fleet)
        check_target_model(endpoint_name, variant, target_model)
        try:
            if variant.variant.serverless is not None:
                reply = await self._call_serverless(endpoint_name, variant, body, headers, request_id)
            elif target_model is not None:
                reply = await self._call_model(endpoint_name, variant, body, headers, target_model)
            else:
                reply, variant = await self._call_routed(
                    endpoint_name, variant, body, headers, target_variant, target_container
                )
        except ModelFault as fault:
            fault.variant_name = variant.variant.variant_name
            raise
        return Invocation(reply, variant.variant.variant_name)

    async def _component(
        self, fleet: EndpointFleet, endpoint_name: str, name: str | None
    ) -> VariantFleet | None:
        """On an endpoint for inference components, the named component's copies (the header is
        required there, and refused elsewhere: spec §1.8); None on any other endpoint. A component
        with no copy in rotation answers SageMaker's no-capacity error."""
        hosts_components = any(v.hosts is not None for v in fleet.variants.values())
        if not hosts_components:
            if name is not None:
                raise ValidationFailed(messages.component_header_not_allowed())
            return None
        if name is None:
            raise ValidationFailed(messages.component_header_missing())
        record = self.inference_components.get_exact(name)
        if record is None or record.endpoint_name != endpoint_name:
            raise ValidationFailed(messages.component_not_on_endpoint(name, endpoint_name))
        base = record.spec.base_component_name
        if base is not None and record.status is not ComponentStatus.IN_SERVICE:
            raise ValidationFailed(messages.adapter_not_in_service(name, record.status.value))
        live = self._live_components.get((base or name).lower())  # an adapter: its base's copies
        if live is None:
            raise ValidationFailed(messages.component_not_on_endpoint(name, endpoint_name))
        if not live.fleet.instances and not live.restored.is_set():
            # [U] after a restart its copies start again: waited for, as a restored endpoint is
            # (restoring.py), within the invocation timeout
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(live.restored.wait(), self.config.limits.invocation_timeout_s)
        if not live.fleet.instances:
            raise NoCapacity(messages.component_no_capacity(name), endpoint_name, live.variant_name, name)
        return live.fleet

    def _adapter_headers(self, name: str | None, headers: CIMultiDict[str]) -> CIMultiDict[str]:
        """An adapter's invocation reaches its base's container with the adapter's name in
        X-Amzn-SageMaker-Adapter-Identifier (component_adapters.py)."""
        record = None if name is None else self.inference_components.get_exact(name)
        if record is None or not record.spec.adapter:
            return headers
        forwarded = CIMultiDict(headers)
        forwarded[ADAPTER_HEADER] = record.name
        return forwarded

    async def _endpoint_fleet(self, endpoint_name: str) -> EndpointFleet:
        """The endpoint's serving fleet; one being restored after a restart is waited for
        (restoring.py)."""
        fleet = await serving_fleet(
            endpoint_name,
            self._fleets.get,
            self._status_of,
            self._status_signals,
            self.config.limits.invocation_timeout_s,
        )
        if fleet is None:
            raise EndpointNotFound(
                messages.runtime_endpoint_not_found(endpoint_name, self.account.account_id)
            )
        if self.async_inference.is_async(endpoint_name):
            raise ValidationFailed(messages.async_endpoint_needs_async_invoke(endpoint_name))
        return fleet

    async def _variant(
        self,
        endpoint_name: str,
        target_variant: str | None,
        target_container: str | None,
        fleet: EndpointFleet | None = None,
    ) -> VariantFleet:
        """The variant that answers (TargetVariant, else by weight), TargetContainerHostname checked;
        an endpoint being restored after a restart is waited for (restoring.py)."""
        fleet = fleet or await self._endpoint_fleet(endpoint_name)
        variant = fleet.choose(target_variant)
        if variant is None:
            raise ValidationFailed(messages.unknown_variant(str(target_variant), endpoint_name))
        check_target_container(endpoint_name, variant, target_container)
        return variant

    def _status_of(self, endpoint_name: str) -> EndpointStatus | None:
        endpoint = self.endpoints.get(endpoint_name)
        return None if endpoint is None else endpoint.status

    async def invoke_async(
        self, endpoint_name: str, input_location: str | None, **options: Any
    ) -> AsyncRequest:
        """InvokeEndpointAsync: the request joins the endpoint's queue (answered 202 at once); the
        endpoint's worker runs it (async_inference/worker.py). An endpoint being restored after a
        restart is waited for first, as for InvokeEndpoint (restoring.py): its queue is loaded when
        it serves again."""
        fleet = await serving_fleet(
            endpoint_name,
            self._fleets.get,
            self._status_of,
            self._status_signals,
            self.config.limits.invocation_timeout_s,
        )
        if fleet is None:
            raise EndpointNotFound(
                messages.runtime_endpoint_not_found(endpoint_name, self.account.account_id)
            )
        if not self.async_inference.is_async(endpoint_name):
            raise ValidationFailed(messages.endpoint_not_async(endpoint_name))
        return self.async_inference.submit(endpoint_name, input_location, **options)

    async def _call_serverless(
        self,
        endpoint_name: str,
        variant: VariantFleet,
        body: bytes,
        headers: CIMultiDict[str],
        request_id: str,
    ) -> ContainerReply:
        """A serverless variant's call: the 4 MB limits both ways, then the container call admitted
        by hosting/serverless (MaxConcurrency, a cold start when no container is warm); a broken
        connection from a container killed over its memory limit says so."""
        if len(body) > serverless.MAX_PAYLOAD_BYTES:
            raise ValidationFailed(messages.serverless_oversize(request_id))
        context = self._fault_contexts[endpoint_name]

        def wanted() -> bool:
            fleet = self._fleets.get(endpoint_name)
            return fleet is not None and variant in fleet.variants.values()

        for attempt in range(2):
            async with self.serverless.admitted(endpoint_name, variant, context, wanted) as capacity:
                try:
                    reply = await self._call(endpoint_name, variant, body, headers)
                    break
                except NoInstanceInRotation as fault:
                    # its warm container died before the request reached it (refused, taken out
                    # of rotation): admitted once more, which starts a container, as SageMaker does
                    if attempt:
                        raise await self.serverless.explain(capacity, context, fault) from None
                except ModelFault as fault:
                    raise await self.serverless.explain(capacity, context, fault) from None
        if len(reply.body) > serverless.MAX_PAYLOAD_BYTES:
            too_large = messages.response_too_large(serverless.MAX_PAYLOAD_BYTES)
            over = context.fault(ModelResponseTooLarge, 0, too_large)
            over.model_latency_s = reply.elapsed_s
            raise over
        return reply

    async def _call(
        self,
        endpoint_name: str,
        variant: VariantFleet,
        body: bytes,
        headers: CIMultiDict[str],
        target_container: str | None = None,
    ) -> ContainerReply:
        """One container call on the variant's chosen instance (a refused connection: once more)."""
        context = self._fault_contexts[endpoint_name]

        async def call(instance: Instance) -> ContainerReply:
            if not instance.containers:
                return await self.invoker.invoke(instance.invocations_url, body, headers, context)
            if target_container is not None:
                container = instance.by_hostname[target_container]
                return await pipeline.call_direct(self.invoker, container, body, headers, context)
            budget_s = self.config.limits.invocation_timeout_s
            return await pipeline.call_serial(self.invoker, instance, body, headers, context, budget_s)

        reply, _ = await self._on_instance(endpoint_name, variant, call)
        return reply

    async def _call_routed(
        self,
        endpoint_name: str,
        variant: VariantFleet,
        body: bytes,
        headers: CIMultiDict[str],
        target_variant: str | None,
        target_container: str | None,
    ) -> tuple[ContainerReply, VariantFleet]:
        """`_call` on the variant chosen by weight; when that variant's every instance went out of
        rotation before the request reached one (refused: a killed container whose exit is not yet
        seen), the request goes once to the variant the endpoint routes to now, as the choice by
        weight does for a variant with no instance in rotation (EndpointFleet.choose) [U]. A
        TargetVariant request stays with its variant."""
        try:
            return await self._call(endpoint_name, variant, body, headers, target_container), variant
        except NoInstanceInRotation:
            if target_variant is not None:
                raise
            other = await self._variant(endpoint_name, None, target_container)
            if other is variant or not other.instances:
                raise
            return await self._call(endpoint_name, other, body, headers, target_container), other

    async def _on_instance(
        self,
        endpoint_name: str,
        variant: VariantFleet,
        call: Callable[[Instance], Awaitable[_T]],
        hold: bool = False,
    ) -> tuple[_T, Instance]:
        """`call` on the variant's chosen instance, counted in its outstanding requests (`hold`: the
        count stays up after a success, for the caller to take down: a stream until its end).
        A refused connection is tried once more, on the instance picked next."""
        context = self._fault_contexts[endpoint_name]
        for attempt in range(2):
            if not variant.instances:  # [U] every instance of the variant is being replaced
                raise context.fault(
                    NoInstanceInRotation,
                    0,
                    messages.container_unreachable("no healthy instance is in rotation"),
                )
            instance = variant.picker.pick(variant.instances)
            instance.outstanding += 1
            held = False
            try:
                result = await call(instance)
                held = hold
                if instance.first_call is not None:  # the cold-start profile's first invocation
                    instance.first_call()
            except ModelUnreachable as exc:
                # Refused, or a new connection dropped unanswered (exc.suspect; the invoker already
                # retried a stale pooled one): the instance looks gone. Take it out of rotation now,
                # before its exit event arrives (a ping puts it back if it was a one-off). Only a
                # connection that was never made is safe to send elsewhere,
                # once; a request the container may have received is the client's 424.
                if exc.suspect:
                    self._suspect(endpoint_name, variant, instance)
                if not instance.containers:  # gone mid-request: name its exit code when the watcher has it
                    explained = await with_exit_code(exc, instance, context)
                    if explained is not exc:
                        raise explained from explained.__cause__
                if attempt or not isinstance(exc.__cause__, aiohttp.ClientConnectorError):
                    raise
                continue
            finally:
                if not held:
                    instance.outstanding -= 1
            return result, instance
        raise AssertionError("unreachable")  # the loop returns or raises

    async def invoke_stream(
        self,
        endpoint_name: str,
        body: bytes,
        headers: CIMultiDict[str],
        target_variant: str | None,
        target_container: str | None = None,
        inference_component: str | None = None,
    ) -> StreamInvocation:
        """InvokeEndpointWithResponseStream: as `invoke` up to the container's first byte (the same
        choices and ModelFaults), then the container's answer as a ContainerStream. The instance
        counts the request as outstanding until `StreamInvocation.close`."""
        fleet = await self._endpoint_fleet(endpoint_name)
        component = await self._component(fleet, endpoint_name, inference_component)
        headers = self._adapter_headers(inference_component, headers)
        variant = component or await self._variant(endpoint_name, target_variant, target_container, fleet)
        if variant.plan is not None and variant.plan.model.multi_model:
            raise ValidationFailed(messages.streaming_multi_model(endpoint_name))
        if variant.variant.serverless is not None:
            raise ValidationFailed(messages.serverless_streaming(endpoint_name))
        context = self._fault_contexts[endpoint_name]
        limits = StreamLimits.of(self.config.limits)

        async def call(instance: Instance) -> ContainerStream:
            if not instance.containers:
                return await open_stream(
                    self.invoker, instance.invocations_url, body, headers, context, limits
                )
            if target_container is not None:
                container = instance.by_hostname[target_container]
                return await pipeline.open_direct_stream(
                    self.invoker, container, body, headers, context, limits
                )
            budget_s = self.config.limits.invocation_timeout_s
            return await pipeline.open_serial_stream(
                self.invoker, instance, body, headers, context, budget_s, limits
            )

        try:
            stream, instance = await self._on_instance(endpoint_name, variant, call, hold=True)
        except ModelFault as fault:
            fault.variant_name = variant.variant.variant_name
            raise
        return StreamInvocation(
            stream, variant.variant.variant_name, instance, component_name=inference_component
        )

    async def _call_model(
        self, endpoint_name: str, variant: VariantFleet, body: bytes, headers: CIMultiDict[str], target: str
    ) -> ContainerReply:
        """A multi-model call: an instance that has the model loaded (else the variant's pick), the
        model made ready there (downloaded and loaded on first use), then its invoke route."""
        context = self._fault_contexts[endpoint_name]
        if not variant.instances:  # [U] every instance of the variant is being replaced
            raise context.fault(
                ModelUnreachable, 0, messages.container_unreachable("no healthy instance is in rotation")
            )
        assert variant.plan is not None
        instance = self.multi_model.choose(variant.instances, target) or variant.picker.pick(
            variant.instances
        )
        try:
            return await self._call_model_on(instance, context, variant, body, headers, target)
        except InstanceStopped:  # retired while it loaded the model: once more, on another [U]
            fleet = self._fleets.get(endpoint_name)  # an update may have put in a new fleet
            variant = (fleet.variants.get(variant.variant.variant_name) if fleet else None) or variant
            others = [i for i in variant.instances if i is not instance]
            if not others:
                raise context.fault(
                    ModelUnreachable, 0, messages.container_unreachable(STOPPED_WHILE_LOADING)
                ) from None
            instance = self.multi_model.choose(others, target) or variant.picker.pick(others)
        try:
            return await self._call_model_on(instance, context, variant, body, headers, target)
        except InstanceStopped:
            raise context.fault(
                ModelUnreachable, 0, messages.container_unreachable(STOPPED_WHILE_LOADING)
            ) from None

    async def _call_model_on(
        self,
        instance: Instance,
        context: FaultContext,
        variant: VariantFleet,
        body: bytes,
        headers: CIMultiDict[str],
        target: str,
    ) -> ContainerReply:
        assert variant.plan is not None
        instance.outstanding += 1
        try:
            model = await self.multi_model.ready(variant.plan, instance, target, context)
            try:
                forwarded = CIMultiDict(headers)
                forwarded[TARGET_MODEL_HEADER] = target
                url = model.invoke_url
                if url is None:
                    url = model.invoke_url = URL(f"{instance.base_url}/models/{model.name}/invoke")
                return await self.invoker.invoke(url, body, forwarded, context)
            finally:
                self.multi_model.release(variant.plan, instance, model)
        except ModelUnreachable as exc:
            if exc.suspect:  # the instance looks gone: out of rotation now, as for any endpoint
                self._suspect(context.endpoint_name, variant, instance)
            raise
        finally:
            instance.outstanding -= 1
