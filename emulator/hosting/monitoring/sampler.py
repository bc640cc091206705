"""CPU, memory, disk and GPU use of every live instance, sampled once per metric period into `Metrics`
(the /aws/sagemaker/Endpoints namespace; docs/metrics.md). An instance's figures are summed over its
containers (spec §10.2); a multi-container instance's CPU and memory are also recorded per container
(dimension ContainerName)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field

from emulator.hosting.monitoring.disk import ModelDataSizes, utilization
from emulator.hosting.monitoring.store import Metrics
from emulator.runtime import gpus as gpu_readers
from emulator.runtime.base import DiskUsage

log = logging.getLogger(__name__)


#: (CPU percent, memory percent) of one container sample.
_Pair = tuple[float | None, float | None]


def _total(values: Iterable[float | None]) -> float | None:
    found = list(values)
    return None if not found or any(v is None for v in found) else sum(v for v in found if v is not None)


@dataclass(frozen=True)
class InstanceRef:
    """One live instance as the engine's labels name it."""

    endpoint: str
    variant: str
    instance_id: str
    container_id: str
    #: The ContainerHostname of a multi-container instance's container; "" for a single container.
    container_name: str = ""


@dataclass(frozen=True)
class InstanceProbes:
    """The disk and GPU side of sampling (app.py wires them to the runtime and the config).

    `disk_usage` lists what every running endpoint container keeps on disk (one engine call),
    `volume_bytes` gives a variant's volume per instance, `gpus` reads the host's GPUs (None: this
    host has none readable: no GPU datapoints at all), `gpu_access` says whether a container was
    given them. Disk is sampled every `disk_every` periods (the engine walks each writable layer)."""

    disk_usage: Callable[[], Mapping[str, DiskUsage]] | None = None
    volume_bytes: Callable[[str, str], float] | None = None
    gpus: gpu_readers.GpuReader | None = None
    gpu_access: Callable[[str], bool] | None = None
    disk_every: int = 1
    model_sizes: ModelDataSizes = field(default_factory=ModelDataSizes)
    #: (endpoint, variant, models loaded) of each multi-model instance: LoadedModelCount
    loaded_models: Callable[[], Iterable[tuple[str, str, int]]] | None = None


class Sampler:
    """Samples every live instance's CPU, memory, disk and GPUs once per period (a background task).

    `instances` lists the live containers (one engine call), `stats` samples one container (blocking:
    run in threads, at most `concurrency` at a time: Docker 20.10 takes up to ~1 s to answer a
    one-shot stats call, waiting, not computing), `instance_counts` gives each variant's count,
    `probes` the disk and GPU side (one more thread, alongside the stats calls). The cost per period
    is two list calls and one stats call per container (plus a GPU read where instances have GPUs),
    never on the request path.
    """

    def __init__(
        self,
        metrics: Metrics,
        instances: Callable[[], Iterable[InstanceRef]],
        stats: Callable[[str], tuple[float | None, float | None] | None],
        instance_counts: Callable[[], Awaitable[Mapping[tuple[str, str], int]]],
        interval_s: float,
        concurrency: int = 4,
        probes: InstanceProbes | None = None,
    ) -> None:
        self._metrics = metrics
        self._instances = instances
        self._stats = stats
        self._counts = instance_counts
        self._interval = interval_s
        self._limit = asyncio.Semaphore(concurrency)
        self._task: asyncio.Task[None] | None = None
        self._probes = probes or InstanceProbes()
        self._samples = 0
        #: Seconds the last disk and GPU reads took (docs/metrics.md has the figures).
        self.last_disk_s: float | None = None
        self.last_gpu_s: float | None = None

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

        probes = self._probes
        disk_due = probes.disk_usage is not None and self._samples % max(probes.disk_every, 1) == 0
        self._samples += 1
        results = await asyncio.gather(
            asyncio.gather(*(one(r) for r in refs)),
            asyncio.to_thread(self._disk, refs) if disk_due else _nothing(),
            asyncio.to_thread(self._gpu, refs),
        )
        self._record_cpu_memory(results[0])
        if probes.loaded_models is not None:
            for endpoint, variant, count in probes.loaded_models():
                self._metrics.record_model_metric(endpoint, variant, "LoadedModelCount", float(count))
        for (endpoint, variant), disk in results[1] or ():
            self._metrics.record_utilization(endpoint, variant, None, None, disk=disk)
        for (endpoint, variant), (gpu, gpu_memory) in results[2]:
            self._metrics.record_utilization(endpoint, variant, None, None, gpu=gpu, gpu_memory=gpu_memory)

    def _record_cpu_memory(
        self, samples: Iterable[tuple[InstanceRef, tuple[float | None, float | None] | None]]
    ) -> None:
        """Each instance's CPU and memory, summed over its containers (a figure only when every
        container has one: a part would understate the instance), and each named container's own."""
        by_instance: dict[tuple[str, str, str], list[tuple[InstanceRef, _Pair | None]]] = {}
        for ref, sample in samples:
            key = (ref.endpoint, ref.variant, ref.instance_id or ref.container_id)
            by_instance.setdefault(key, []).append((ref, sample))
            if ref.container_name and sample is not None:
                self._metrics.record_utilization(
                    ref.endpoint, ref.variant, *sample, container=ref.container_name
                )
        for (endpoint, variant, _instance), group in by_instance.items():
            cpu = _total(s[0] if s is not None else None for _, s in group)
            memory = _total(s[1] if s is not None else None for _, s in group)
            if cpu is not None or memory is not None:
                self._metrics.record_utilization(endpoint, variant, cpu, memory)

    def _disk(self, refs: list[InstanceRef]) -> list[tuple[tuple[str, str], float]]:
        """DiskUtilization of each instance: its containers' bytes on disk over its volume
        (blocking: one engine call, and a walk of each model data folder the first time)."""
        probes = self._probes
        if probes.disk_usage is None or probes.volume_bytes is None:
            return []
        out: list[tuple[tuple[str, str], float]] = []
        try:
            started = time.perf_counter()
            usage = probes.disk_usage()
            for (endpoint, variant, _instance), group in _by_instance(refs).items():
                found = [usage[r.container_id] for r in group if r.container_id in usage]
                volume = probes.volume_bytes(endpoint, variant)
                if found and volume > 0:
                    out.append(((endpoint, variant), utilization(probes.model_sizes.in_use(found), volume)))
            self.last_disk_s = time.perf_counter() - started
        except Exception as exc:  # noqa: BLE001 - an engine hiccup: no disk datapoint this period
            log.debug("no disk usage: %s", exc)
            return []
        return out

    def _gpu(
        self, refs: list[InstanceRef]
    ) -> list[tuple[tuple[str, str], tuple[float | None, float | None]]]:
        """GPUUtilization and GPUMemoryUtilization of each instance whose containers have the GPUs
        (blocking). Each such instance sees all of the host's GPUs (docker run --gpus all), so each
        reports all of them; an instance without GPUs, or a host without any, reports nothing."""
        reader, access = self._probes.gpus, self._probes.gpu_access
        if reader is None or access is None or not refs:
            return []
        try:
            started = time.perf_counter()
            with_gpus = [
                (endpoint, variant)
                for (endpoint, variant, _instance), group in _by_instance(refs).items()
                if any(access(r.container_id) for r in group)
            ]
            if not with_gpus:
                return []
            util, memory = gpu_readers.totals(reader())
            if util is None and memory is None:
                return []
            out = [(key, (util, memory)) for key in with_gpus]
            self.last_gpu_s = time.perf_counter() - started
        except Exception as exc:  # noqa: BLE001 - a driver hiccup: no GPU datapoint this period
            log.debug("no GPU sample: %s", exc)
            return []
        return out


def _by_instance(refs: Iterable[InstanceRef]) -> dict[tuple[str, str, str], list[InstanceRef]]:
    """The containers of each instance (a multi-container instance has several)."""
    groups: dict[tuple[str, str, str], list[InstanceRef]] = {}
    for ref in refs:
        groups.setdefault((ref.endpoint, ref.variant, ref.instance_id or ref.container_id), []).append(ref)
    return groups


async def _nothing() -> list[tuple[tuple[str, str], float]]:
    return []
