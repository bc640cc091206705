"""CPU and memory of every live instance, sampled once per metric period into `Metrics`
(the /aws/sagemaker/Endpoints namespace; docs/metrics.md)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

from emulator.hosting.monitoring.store import Metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InstanceRef:
    """One live instance as the engine's labels name it."""

    endpoint: str
    variant: str
    instance_id: str
    container_id: str


class Sampler:
    """Samples every live instance's CPU and memory once per period (a background task).

    `instances` lists the live instances (one engine call), `stats` samples one container (blocking:
    run in threads, at most `concurrency` at a time: Docker 20.10 takes up to ~1 s to answer a
    one-shot stats call, waiting, not computing), `instance_counts` gives each variant's count.
    The cost per period is one list call and one stats call per instance, never on the request path.
    """

    def __init__(
        self,
        metrics: Metrics,
        instances: Callable[[], Iterable[InstanceRef]],
        stats: Callable[[str], tuple[float | None, float | None] | None],
        instance_counts: Callable[[], Awaitable[Mapping[tuple[str, str], int]]],
        interval_s: float,
        concurrency: int = 4,
    ) -> None:
        self._metrics = metrics
        self._instances = instances
        self._stats = stats
        self._counts = instance_counts
        self._interval = interval_s
        self._limit = asyncio.Semaphore(concurrency)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="metrics-sampler")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.sample()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a failed sample must not end sampling
                log.debug("metrics sample failed: %s", exc)
            await asyncio.sleep(max(self._interval - (time.monotonic() - started), 0.0))

    async def sample(self) -> None:
        for (endpoint, variant), count in (await self._counts()).items():
            self._metrics.set_instances(endpoint, variant, count)
        refs = list(await asyncio.to_thread(lambda: list(self._instances())))

        async def one(ref: InstanceRef) -> tuple[InstanceRef, tuple[float | None, float | None] | None]:
            async with self._limit:
                try:
                    return ref, await asyncio.to_thread(self._stats, ref.container_id)
                except Exception as exc:  # noqa: BLE001 - a container gone meanwhile: no sample
                    log.debug("no stats for %s: %s", ref.container_id, exc)
                    return ref, None

        for ref, sample in await asyncio.gather(*(one(r) for r in refs)):
            if sample is not None:
                self._metrics.record_utilization(ref.endpoint, ref.variant, *sample)
