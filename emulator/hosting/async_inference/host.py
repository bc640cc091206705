"""The asynchronous endpoints of one server: their workers, their queues' files, S3 access.

HostingService hands every endpoint that goes InService the AsyncInferenceConfig of the config it
deployed (`serve`; None: a real-time endpoint), submits InvokeEndpointAsync's requests (`submit`)
and forgets the endpoint at DeleteEndpoint (its queue is dropped with it). An endpoint updated from
an async config to a real-time one is real-time at once (InvokeEndpoint served, InvokeEndpointAsync
refused); its worker runs the requests already queued on the new fleet with the old settings, then
its queue goes [U] (`settings.json` beside the queue keeps those settings for a restart meanwhile).
Before smlocal stops an instance (a scale-in, an update's old fleet, a graceful stop) it says so
(`retiring`): a request whose call breaks there waits again instead of failing. Locations [U]: the output is
`{S3OutputPath}[/{S3OutputPathExtension}]/{Filename or InferenceId.out}`, the failure
`{S3FailurePath or S3OutputPath}[/{extension}]/{InferenceId}-error.out`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import shutil
import time
import uuid
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from emulator.config import ServerConfig
from emulator.errors import ValidationFailed
from emulator.hosting.async_inference.counters import AsyncMetrics
from emulator.hosting.async_inference.queue import AsyncRequest, RequestQueue
from emulator.hosting.async_inference.s3_stream import AsyncS3
from emulator.hosting.async_inference.transfer import ContainerCaller
from emulator.hosting.async_inference.worker import AsyncEndpoint
from emulator.hosting.executors import Executors
from emulator.hosting.fleet.invoker import FaultContext
from emulator.hosting.fleet.variants import EndpointFleet, Instance
from emulator.hosting.state_files import write_atomically
from emulator.model import messages
from emulator.model.arns import Account
from emulator.model.resources import AsyncInference
from emulator.model.s3_urls import s3_location

log = logging.getLogger(__name__)

#: The largest answer an async invocation takes from a container (SageMaker: "up to 1 GB") [U].
ASYNC_MAX_RESPONSE_BYTES = 1024**3
#: InvocationTimeoutSeconds and RequestTTLSeconds when the request gives none (spec §1, §8).
DEFAULT_INVOCATION_TIMEOUT_S = 900
DEFAULT_REQUEST_TTL_S = 21600
#: How many samples of the queue metrics each metric period gets [U].
SAMPLES_PER_PERIOD = 6


class AsyncInferenceHost:
    def __init__(
        self,
        config: ServerConfig,
        account: Account,
        executors: Executors,
        s3_client_factory: Callable[[], Any] | None = None,
        sns_client_factory: Callable[[], Any] | None = None,
    ) -> None:
        self._config = config
        self._sns_factory = sns_client_factory or self._default_sns_factory
        self._sns: Any = None
        self._account = account
        self._executors = executors
        self._s3 = AsyncS3(s3_client_factory or self._default_factory, executors.async_io)
        self._endpoints: dict[str, AsyncEndpoint] = {}
        #: where the workers' metrics go (app.py: the metric store)
        self.metrics = AsyncMetrics()
        self._sampler: asyncio.Task[None] | None = None
        self._invoker = ContainerCaller(ASYNC_MAX_RESPONSE_BYTES)
        #: instances smlocal is stopping: a request whose call breaks there is not failed
        self._retired: weakref.WeakSet[Instance] = weakref.WeakSet()

    def _default_factory(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self._config.s3_endpoint_url, region_name=self._config.region)

    def _default_sns_factory(self) -> Any:
        import boto3

        return boto3.client(
            "sns", endpoint_url=self._config.sns_endpoint_url, region_name=self._config.region
        )

    async def start(self) -> None:
        await self._invoker.start()
        self._sampler = asyncio.get_running_loop().create_task(self._sample(), name="async-metrics")

    async def _sample(self) -> None:
        """The queue metrics of every async endpoint, SAMPLES_PER_PERIOD times per metric period:
        ApproximateBacklogSize (waiting and running), ...PerInstance (over the instances, the backlog
        itself at none [U]), ApproximateAgeOfOldestRequest (policy s), HasBacklogWithoutCapacity."""
        interval = self._config.metrics_period_real_s / SAMPLES_PER_PERIOD
        while True:
            await asyncio.sleep(interval)
            now = time.time()
            for name, endpoint in list(self._endpoints.items()):
                backlog = len(endpoint.queue)
                instances = endpoint.instance_count()
                oldest = endpoint.queue.oldest_received()
                record = self.metrics.record
                record(name, None, "ApproximateBacklogSize", float(backlog))
                record(
                    name,
                    None,
                    "ApproximateBacklogSizePerInstance",
                    backlog / instances if instances else float(backlog),
                )
                # in policy seconds (--time-scale), as the alarms that read it count time
                age = 0.0 if oldest is None else (now - oldest) * self._config.time_scale
                record(name, None, "ApproximateAgeOfOldestRequest", age)
                record(name, None, "HasBacklogWithoutCapacity", 1.0 if backlog and not instances else 0.0)

    def stop_dispatching(self) -> None:
        """A graceful stop begins: no request starts from now on, and the instances of the running
        ones count as retired (a call that breaks when their containers stop waits again)."""
        for endpoint in self._endpoints.values():
            endpoint.stop_dispatching()

    def retiring(self, instances: list[Instance]) -> None:
        """smlocal is about to stop these instances."""
        for instance in instances:
            self._retired.add(instance)

    def drain_deadline(self, instances: list[Instance]) -> float | None:
        """The loop time by which every async request running on `instances` has had its own
        InvocationTimeoutSeconds (None: none runs there)."""
        ends = [d for e in self._endpoints.values() if (d := e.drain_deadline(instances)) is not None]
        return max(ends) if ends else None

    async def close(self, wait_s: float = 0.0) -> None:
        """`wait_s`: how long requests still running (writing their results, or failing over to the
        queue as their containers stop) may take before they are cancelled (they stay queued)."""
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler
        await asyncio.gather(*(e.close(wait_s) for e in self._endpoints.values()))
        self._endpoints.clear()
        await self._invoker.close()

    def is_async(self, name: str) -> bool:
        """Whether the endpoint serves InvokeEndpointAsync (its deployed config is async)."""
        endpoint = self._endpoints.get(name)
        return endpoint is not None and not endpoint.draining

    def endpoint(self, name: str) -> AsyncEndpoint | None:
        return self._endpoints.get(name)

    def _folder(self, name: str) -> Path:
        return self._config.state_dir / "async" / name

    def serve(
        self,
        name: str,
        settings: AsyncInference | None,
        fleet: Callable[[], EndpointFleet | None],
        platform_log: Callable[[str], None],
    ) -> None:
        """The endpoint is InService with `settings` (its deployed AsyncInferenceConfig; None: it is
        real-time). Starts (or, after an update, re-reads) its worker, its queue loaded from disk; a
        worker whose endpoint became real-time drains what is queued."""
        current = self._endpoints.get(name)
        drain = settings is None
        if settings is None:
            if current is not None:
                if not current.draining:
                    platform_log(
                        f"the endpoint is real-time now: {len(current.queue)} queued asynchronous "
                        "request(s) still run"
                    )
                current.draining = True
                current.wake()
                return
            saved = self._saved_settings(name)
            if saved is None:  # real-time, and no queue left from an async past
                shutil.rmtree(self._folder(name), ignore_errors=True)
                return
            settings = saved  # a restart while the worker drained: it drains on
        elif current is not None:
            current.settings = settings
            current.draining = False
            self._save_settings(name, settings)
            current.wake()
            return
        else:
            self._save_settings(name, settings)
        queue = RequestQueue(self._folder(name) / "queue.json")
        endpoint = AsyncEndpoint(
            name,
            settings,
            queue,
            fleet,
            self._invoker,
            FaultContext(self._account, name),
            self._s3.open_input,
            self._s3.put,
            platform_log,
            self._publish,
            self._config.region,
            self.metrics,
            self._config.time_scale,
            open_output=self._s3.open_output,
        )
        endpoint.retired = self._retired
        endpoint.draining = drain
        endpoint.on_empty = lambda: self._drained(name, endpoint)
        self._endpoints[name] = endpoint
        if len(queue):
            platform_log(f"{len(queue)} queued asynchronous request(s) loaded")
        endpoint.start()

    def _save_settings(self, name: str, settings: AsyncInference) -> None:
        write_atomically(self._folder(name) / "settings.json", json.dumps(dataclasses.asdict(settings)))

    def _saved_settings(self, name: str) -> AsyncInference | None:
        """The settings of a queue left by an endpoint that became real-time (None: no such queue)."""
        path = self._folder(name) / "settings.json"
        if not path.exists() or not any(self._folder(name).glob("queue*")):
            return None
        saved = json.loads(path.read_text())
        return AsyncInference(**{**saved, "include_response_in": tuple(saved["include_response_in"])})

    def _drained(self, name: str, endpoint: AsyncEndpoint) -> None:
        """A real-time endpoint's last queued request ended: its worker and queue go."""
        if self._endpoints.get(name) is endpoint:
            del self._endpoints[name]
            shutil.rmtree(self._folder(name), ignore_errors=True)

    def forget(self, name: str) -> None:
        """DeleteEndpoint: the worker stops, the queue goes (requests not yet run are not run)."""
        endpoint = self._endpoints.pop(name, None)
        if endpoint is None:
            return
        endpoint.cancel()
        shutil.rmtree(self._folder(name), ignore_errors=True)

    def submit(
        self,
        name: str,
        input_location: str | None,
        content_type: str | None = None,
        accept: str | None = None,
        custom_attributes: str | None = None,
        inference_id: str | None = None,
        ttl_s: int | None = None,
        timeout_s: int | None = None,
        extension: str | None = None,
        filename: str | None = None,
        inline_body: bytes | None = None,
    ) -> AsyncRequest:
        """Queue one request: its input at `input_location` (s3://) or `inline_body` (kept in the
        queue's folder until the request ends)."""
        endpoint = self._endpoints[name]
        if input_location is not None and s3_location(input_location) is None:
            raise ValidationFailed(messages.async_input_not_s3(input_location))
        settings = endpoint.settings
        inference_id = inference_id or str(uuid.uuid4())
        tail = f"/{extension.strip('/')}" if extension else ""
        output = f"{settings.s3_output_path.rstrip('/')}{tail}/{filename or inference_id + '.out'}"
        failure_base = (settings.s3_failure_path or settings.s3_output_path).rstrip("/")
        request = AsyncRequest(
            inference_id=inference_id,
            input_location=input_location or "",
            output_location=output,
            failure_location=f"{failure_base}{tail}/{inference_id}-error.out",
            received_at=time.time(),
            ttl_s=ttl_s or DEFAULT_REQUEST_TTL_S,
            timeout_s=timeout_s or DEFAULT_INVOCATION_TIMEOUT_S,
            content_type=content_type,
            accept=accept,
            custom_attributes=custom_attributes,
        )
        endpoint.submit(request, inline_body)
        return request

    # ------------------------------------------------------------------ SNS, on the async I/O pool

    async def _publish(self, topic: str, text: str) -> None:
        def publish() -> None:
            if self._sns is None:
                self._sns = self._sns_factory()
            self._sns.publish(TopicArn=topic, Message=text)

        await self._executors.async_io(publish)
