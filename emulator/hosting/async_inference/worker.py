"""The workers of one asynchronous endpoint: requests from its queue to its instances.

A request is started when an instance has fewer than MaxConcurrentInvocationsPerInstance requests
in flight (the least busy instance of any variant [U]); none is started while the endpoint has no
instance (a scaled-to-zero variant: requests wait). For each: the input is streamed from S3 into
a POST to the container's /invocations with the request's Content-Type, Accept and custom
attributes within its InvocationTimeoutSeconds, and a 2xx answer is streamed into its OutputLocation
(the container's Content-Type kept; transfer.py, s3_stream.py); a non-2xx answer, a timeout, an
unreachable container or an unreadable input writes the reason to its FailureLocation. A request
whose output or failure cannot be written is still accounted for: the ErrorTopic notification, the
metrics and the `_smlocal` log say so. A request that waited past its RequestTTLSeconds is
dropped when its turn comes, and counted.

smlocal retiring an instance (a scale-in, an update's old fleet, a graceful stop) is not the
request's failure: the host marks the instance `retired` just before stopping it, and a container
call that breaks on a retired instance puts the request back in the queue (its run counted, as after
a crash) instead of writing a failure. A graceful stop first stops dispatching (`stop_dispatching`),
so no request is sent to a stopping instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Awaitable, Callable

import aiohttp
from multidict import CIMultiDict

from emulator.errors import ModelErrorResponse, ModelFault
from emulator.hosting.async_inference import notify
from emulator.hosting.async_inference.counters import AsyncMetrics, Counters
from emulator.hosting.async_inference.queue import AsyncRequest, RequestQueue
from emulator.hosting.async_inference.s3_stream import BytesInput, InputSource, S3Failure, S3Output
from emulator.hosting.async_inference.transfer import ContainerCaller
from emulator.hosting.fleet.invoker import FaultContext
from emulator.hosting.fleet.variants import EndpointFleet, Instance
from emulator.model import messages
from emulator.model.resources import AsyncInference

log = logging.getLogger(__name__)

#: How often a worker with waiting requests looks for an instance with room when nothing wakes it.
CAPACITY_POLL_S = 1.0


#: How long an instance that refused a connection gets no request (its container is gone: killed,
#: and its exit not yet seen, which takes it out of the fleet; else a one-off, and it serves again).
REFUSED_HOLD_S = 1.0


class Interrupted(Exception):
    """The request's container call broke because smlocal retired its instance, or never reached
    its container (the connection refused): it waits again. The text says which."""


#: S3 access (s3_stream.AsyncS3): get(url) -> the input opened, put(url, data, content_type),
#: open_output(url, content_type) -> a writer
Get = Callable[[str], Awaitable[InputSource]]
Put = Callable[[str, bytes, str | None], Awaitable[None]]
OpenOutput = Callable[[str, str | None], S3Output]
#: SNS: publish(topic ARN, message text)
Publish = Callable[[str, str], Awaitable[None]]


class AsyncEndpoint:
    def __init__(
        self,
        name: str,
        settings: AsyncInference,
        queue: RequestQueue,
        fleet: Callable[[], EndpointFleet | None],
        invoker: ContainerCaller,
        context: FaultContext,
        get: Get,
        put: Put,
        platform_log: Callable[[str], None],
        publish: Publish | None = None,
        region: str = "us-east-1",
        metrics: AsyncMetrics | None = None,
        time_scale: float = 1.0,
        open_output: OpenOutput | None = None,
    ) -> None:
        self.name = name
        self._open_output = open_output
        #: `smlocal serve --time-scale`: RequestTTLSeconds is policy time, as the autoscaling it races
        self._time_scale = time_scale
        self.metrics = metrics or AsyncMetrics()
        self._publish = publish
        self._region = region
        #: the endpoint config's AsyncInferenceConfig (replaced by the host after an update)
        self.settings = settings
        self.queue = queue
        self._fleet = fleet
        self._invoker = invoker
        self._context = context
        self._get = get
        self._put = put
        self._platform_log = platform_log
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self.counters = Counters()
        #: instances smlocal is stopping (shared by the host): a broken call there is not a failure
        self.retired: weakref.WeakSet[Instance] = weakref.WeakSet()
        #: instances that refused a connection -> the loop time until which they get no request
        self._refused: weakref.WeakKeyDictionary[Instance, float] = weakref.WeakKeyDictionary()
        #: each running request's instance and the loop time its container call must end by
        self._in_flight: dict[asyncio.Task[None], tuple[Instance, float]] = {}
        #: the endpoint is real-time now: this worker runs what is queued, then `on_empty` is called
        self.draining = False
        self.on_empty: Callable[[], None] = lambda: None

    def start(self) -> None:
        self._loop_task = asyncio.get_running_loop().create_task(self._run(), name=f"async-{self.name}")
        self._wake.set()

    def wake(self) -> None:
        """Look for work: a request arrived, a request ended, or the endpoint's instances changed."""
        self._wake.set()

    def submit(self, request: AsyncRequest, inline_body: bytes | None = None) -> None:
        self.queue.put(request, inline_body)
        self._wake.set()

    def instance_count(self) -> int:
        fleet = self._fleet()
        return 0 if fleet is None else len(fleet.all_instances())

    def cancel(self) -> None:
        """Stop at once (DeleteEndpoint): the requests in flight are abandoned."""
        for task in (self._loop_task, *self._tasks):
            if task is not None:
                task.cancel()

    def stop_dispatching(self) -> None:
        """A graceful stop begins: no request starts from now on, and the instances of those running
        count as retired (their containers are about to be stopped)."""
        if self._loop_task is not None:
            self._loop_task.cancel()
        for instance, _ in self._in_flight.values():
            self.retired.add(instance)

    def drain_deadline(self, instances: list[Instance]) -> float | None:
        """The loop time by which the requests running on `instances` must have ended their container
        calls (their own InvocationTimeoutSeconds), None when none runs there."""
        ends = [end for instance, end in self._in_flight.values() if instance in instances]
        return max(ends) if ends else None

    async def close(self, wait_s: float = 0.0) -> None:
        """Stop the worker; requests still running after `wait_s` seconds are cancelled (they stay
        in the queue's file: a restart runs them again)."""
        if self._loop_task is not None:
            self._loop_task.cancel()
        running = list(self._tasks)
        if running and wait_s > 0:
            await asyncio.wait(running, timeout=wait_s)
        tasks = [t for t in (self._loop_task, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            # woken by a request's arrival or end; otherwise once a second, so that instances
            # coming back (a scale-out from zero, a replacement) are seen
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CAPACITY_POLL_S):
                    await self._wake.wait()
            self._wake.clear()
            self._dispatch()
            if self.draining and not len(self.queue):
                self.on_empty()
                return

    def _dispatch(self) -> None:
        while (request := self.queue.peek()) is not None:
            if time.time() - request.received_at > request.ttl_s / self._time_scale:
                self.queue.drop(request)
                self.counters.expired += 1
                fleet = self._fleet()
                if fleet is not None and fleet.variants:  # [U] the endpoint's first variant
                    self.metrics.record(self.name, next(iter(fleet.variants)), "ExpiredRequests", 1.0)
                self._platform_log(messages.async_request_expired(request.inference_id, request.ttl_s))
                continue
            instance = self._free_instance()
            if instance is None:
                return
            self.queue.start(request)
            if request.runs > 1:
                self._platform_log(
                    f"inference {request.inference_id} started again (run {request.runs}) after smlocal "
                    "interrupted its last run (a restart, or its instance retired): the model may have "
                    "seen it before"
                )
            instance.outstanding += 1
            loop = asyncio.get_running_loop()
            task = loop.create_task(self._process(request, instance))
            self._tasks.add(task)
            self._in_flight[task] = (instance, loop.time() + request.timeout_s)
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(lambda t: self._in_flight.pop(t, None))

    def _free_instance(self) -> Instance | None:
        fleet = self._fleet()
        if fleet is None:
            return None
        now = asyncio.get_running_loop().time()
        free = [
            i
            for i in fleet.all_instances()
            if i.outstanding < self.settings.concurrency and self._refused.get(i, 0.0) <= now
        ]
        return min(free, key=lambda i: i.outstanding) if free else None

    async def _process(self, request: AsyncRequest, instance: Instance) -> None:
        started = time.time()
        variant = instance.variant_name
        self.metrics.record(self.name, variant, "TimeInBacklog", (started - request.received_at) * 1e3)
        try:
            await self._handle(request, instance)
        except asyncio.CancelledError:
            raise  # smlocal stopping: the request stays in the queue file, a restart runs it again
        except Interrupted as why:
            self.queue.requeue(request)
            self.counters.requeued += 1
            self._platform_log(
                f"inference {request.inference_id} interrupted: {why}; it waits in the queue again"
            )
        except Exception:  # noqa: BLE001 - one request's failure must not stop the endpoint's worker
            log.exception("inference %s of %s failed", request.inference_id, self.name)
            self.counters.failures += 1
            self.queue.finish(request)
        else:
            self.queue.finish(request)
            self.metrics.record(
                self.name, variant, "TotalProcessingTime", (time.time() - request.received_at) * 1e3
            )
        finally:
            instance.outstanding -= 1
            self.counters.time_in_backlog_s.append(started - request.received_at)
            self._wake.set()

    async def _handle(self, request: AsyncRequest, instance: Instance) -> None:
        variant = instance.variant_name
        began = time.perf_counter()
        source: InputSource
        try:
            if request.inline_input is not None:
                source = BytesInput(await asyncio.to_thread(self.queue.inline_body, request))
            else:
                source = await self._get(request.input_location)
        except Exception as exc:  # noqa: BLE001 - the S3 client's errors: the request's failure
            await self._download_failed(request, variant, exc)
            return
        self.metrics.record(self.name, variant, "RequestDownloadLatency", (time.perf_counter() - began) * 1e6)
        try:
            await self._call(request, instance, source)
        finally:
            await source.close()

    async def _download_failed(self, request: AsyncRequest, variant: str, exc: Exception) -> None:
        self.counters.download_failures += 1
        self.metrics.record(self.name, variant, "RequestDownloadFailures", 1.0)
        detail = str(exc) if isinstance(exc, S3Failure) else f"{type(exc).__name__}: {exc}"
        await self._fail(request, variant, messages.async_input_unreadable(request.input_location, detail))

    async def _call(self, request: AsyncRequest, instance: Instance, source: InputSource) -> None:
        """The container call, its answer streamed to the output, then the success notification."""
        variant = instance.variant_name
        headers: CIMultiDict[str] = CIMultiDict()
        for name, value in (
            ("Content-Type", request.content_type),
            ("Accept", request.accept),
            ("X-Amzn-SageMaker-Custom-Attributes", request.custom_attributes),
            ("X-Amzn-SageMaker-Inference-Id", request.inference_id),
        ):
            if value is not None:
                headers[name] = value
        assert self._open_output is not None, "AsyncEndpoint needs open_output to write answers"
        open_output = self._open_output
        called = time.perf_counter()
        try:
            reply = await self._invoker.call(
                instance.invocations_url,
                source,
                headers,
                self._context,
                float(request.timeout_s),
                lambda content_type: open_output(request.output_location, content_type),
            )
        except ModelFault as fault:
            if instance in self.retired:  # smlocal stopped the container, not the model's doing
                raise Interrupted(f"smlocal retired its instance {instance.instance_id}") from fault
            if isinstance(fault.__cause__, aiohttp.ClientConnectorError):
                # never reached the model (a killed container whose exit smlocal has not seen yet):
                # SageMaker would run it on a healthy instance, and so does the queue
                self._refused[instance] = asyncio.get_running_loop().time() + REFUSED_HOLD_S
                raise Interrupted(
                    f"instance {instance.instance_id} refused the connection (its container is gone)"
                ) from fault
            if isinstance(fault, ModelErrorResponse) and 400 <= fault.original_status < 500:
                self.counters.errors_4xx += 1
            elif isinstance(fault, ModelErrorResponse):
                self.counters.errors_5xx += 1
            elapsed = time.perf_counter() - called
            self.metrics.invocation(self.name, variant, fault.original_status, fault.model_latency_s, elapsed)
            await self._fail(request, variant, str(fault))
            return
        except S3Failure as failure:
            if source.error is failure:  # the input broke on its way to the container
                await self._download_failed(request, variant, failure)
                return
            self.counters.upload_failures += 1
            self.metrics.record(self.name, variant, "ResponseUploadFailures", 1.0)
            await self._fail(
                request, variant, messages.async_output_unwritable(request.output_location, str(failure))
            )
            return
        total_s = time.perf_counter() - called
        self.metrics.invocation(self.name, variant, reply.status, reply.elapsed_s, total_s)
        self.metrics.record(
            self.name, variant, "ResponseUploadLatency", max(0.0, total_s - reply.elapsed_s) * 1e6
        )
        self.counters.processed += 1
        self.metrics.record(self.name, variant, "InvocationsProcesssed", 1.0)
        self._platform_log(f"inference {request.inference_id} completed: {request.output_location}")
        included = notify.SUCCESS in self.settings.include_response_in
        document = notify.message(
            request,
            self.name,
            self._region,
            time.time(),
            content_type=reply.content_type,
            response=reply.body if included else None,
        )
        await self._notify(self.settings.success_topic, document, variant)

    async def _fail(self, request: AsyncRequest, variant: str, reason: str) -> None:
        self.counters.failures += 1
        self.metrics.record(self.name, variant, "InvocationFailures", 1.0)
        self._platform_log(f"inference {request.inference_id} failed: {reason}")
        try:
            await self._put(request.failure_location, reason.encode(), "text/plain")
        except Exception as exc:  # noqa: BLE001 - nowhere left to write it: counted, logged, notified
            self.counters.upload_failures += 1
            self.metrics.record(self.name, variant, "ResponseUploadFailures", 1.0)
            detail = str(exc) if isinstance(exc, S3Failure) else f"{type(exc).__name__}: {exc}"
            line = messages.async_failure_unwritable(request.inference_id, request.failure_location, detail)
            self._platform_log(line)
            log.warning("%s: %s", self.name, line)
        document = notify.message(request, self.name, self._region, time.time(), failure_reason=reason)
        await self._notify(self.settings.error_topic, document, variant)

    async def _notify(self, topic: str | None, document: dict[str, object], variant: str) -> None:
        """Publish to the topic (if configured); a failed publish is counted, the result stands."""
        if topic is None or self._publish is None:
            return
        try:
            await self._publish(topic, notify.encode(document))
        except Exception as exc:  # noqa: BLE001 - the SNS client's errors
            self.counters.notification_failures += 1
            self.metrics.record(self.name, variant, "NotificationFailures", 1.0)
            inference_id = document["inferenceId"]
            self._platform_log(f"inference {inference_id}: the notification to {topic} failed: {exc}")
