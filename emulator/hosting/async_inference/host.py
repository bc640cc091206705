"""The asynchronous endpoints of one server: their workers, their queues' files, S3 access.

HostingService serves an endpoint here when it goes InService with an AsyncInferenceConfig
(`serve`), submits InvokeEndpointAsync's requests (`submit`) and forgets the endpoint at
DeleteEndpoint (its queue is dropped with it). Locations [U]: the output is
`{S3OutputPath}[/{S3OutputPathExtension}]/{Filename or InferenceId.out}`, the failure
`{S3FailurePath or S3OutputPath}[/{extension}]/{InferenceId}-error.out`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
import uuid
from collections.abc import Callable
from typing import Any

from emulator.config import ServerConfig
from emulator.errors import ValidationFailed
from emulator.hosting.async_inference.queue import AsyncRequest, RequestQueue
from emulator.hosting.async_inference.s3_stream import AsyncS3
from emulator.hosting.async_inference.transfer import ContainerCaller
from emulator.hosting.async_inference.worker import AsyncEndpoint, AsyncMetrics
from emulator.hosting.executors import Executors
from emulator.hosting.fleet.invoker import FaultContext
from emulator.hosting.fleet.variants import EndpointFleet
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

    async def close(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler
        for endpoint in list(self._endpoints.values()):
            await endpoint.close()
        self._endpoints.clear()
        await self._invoker.close()

    def is_async(self, name: str) -> bool:
        return name in self._endpoints

    def endpoint(self, name: str) -> AsyncEndpoint | None:
        return self._endpoints.get(name)

    def serve(
        self,
        name: str,
        settings: AsyncInference,
        fleet: Callable[[], EndpointFleet | None],
        platform_log: Callable[[str], None],
    ) -> None:
        """Start (or, after an update, re-read) the endpoint's worker; its queue is loaded from disk."""
        current = self._endpoints.get(name)
        if current is not None:
            current.settings = settings
            current.wake()
            return
        queue = RequestQueue(self._config.state_dir / "async" / name / "queue.json")
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
        self._endpoints[name] = endpoint
        if len(queue):
            platform_log(f"{len(queue)} queued asynchronous request(s) loaded")
        endpoint.start()

    def forget(self, name: str) -> None:
        """DeleteEndpoint: the worker stops, the queue goes (requests not yet run are not run)."""
        endpoint = self._endpoints.pop(name, None)
        if endpoint is None:
            return
        endpoint.cancel()
        shutil.rmtree(self._config.state_dir / "async" / name, ignore_errors=True)

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
