"""ConcurrentRequestsPerCopy: each serving inference component's requests in flight over its copies
in rotation, sampled every `SAMPLE_EVERY_S` policy seconds (the high-resolution metric that
SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution tracks).

[U] AWS publishes it at a 10-second resolution; smlocal samples every 10 s of policy time (wall time
divided by --time-scale) and keeps the samples in its one-minute periods, so a period's Average is
the mean of its samples. A component without a copy in rotation gives no sample.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from emulator.hosting.monitoring.store import Metrics

log = logging.getLogger(__name__)

SAMPLE_EVERY_S = 10.0  # policy seconds
METRIC = "ConcurrentRequestsPerCopy"


def per_copy(load: tuple[int, int] | None) -> float | None:
    """A component's sample: requests in flight over copies in rotation; None without a copy."""
    if load is None or load[1] <= 0:
        return None
    return load[0] / load[1]


class ComponentLoadSampler:
    """The background task that records each component's ConcurrentRequestsPerCopy sample."""

    def __init__(
        self,
        metrics: Metrics,
        components: Callable[[], Iterable[str]],
        load: Callable[[str], tuple[int, int] | None],
        interval_s: float,
    ) -> None:
        self.metrics = metrics
        self._components = components
        self._load = load
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> None:
        """One sample of every serving component."""
        for name in list(self._components()):
            value = per_copy(self._load(name))
            if value is not None:
                self.metrics.record_component_value(name, METRIC, value)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - one bad sample must not stop the next ones
                log.exception("component load sample failed")

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="component load sampler")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
