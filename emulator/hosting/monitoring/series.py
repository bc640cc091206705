"""The periods of one variant's metrics as `Metrics` keeps them in memory: per period the counts and
statistic sets of its requests and instance samples, and running totals since the server started (the
Prometheus exposition's counters). __slots__ objects: `Metrics.record` updates them on the request path.
"""

from __future__ import annotations

import math
from collections import deque

_INF = math.inf


class Stat:
    """Sum, SampleCount, Minimum, Maximum of one statistic set."""

    __slots__ = ("sum", "count", "min", "max")

    def __init__(self) -> None:
        self.sum = 0.0
        self.count = 0
        self.min = _INF
        self.max = -_INF

    def add(self, value: float) -> None:
        self.sum += value
        self.count += 1
        if value < self.min:
            self.min = value
        if value > self.max:
            self.max = value

    def statistics(self) -> dict[str, float]:
        if not self.count:
            return {"SampleCount": 0, "Sum": 0.0}
        return {
            "SampleCount": self.count,
            "Sum": self.sum,
            "Average": self.sum / self.count,
            "Minimum": self.min,
            "Maximum": self.max,
        }


class Period:
    """One period of one variant."""

    __slots__ = (
        "index",
        "invocations",
        "per_instance",
        "errors_4xx",
        "errors_5xx",
        "model_errors",
        "model_latency",
        "overhead_latency",
        "cpu",
        "memory",
        "disk",
        "gpu",
        "gpu_memory",
        "model_loading_wait",
        "model_unloading",
        "model_downloading",
        "model_loading",
        "cache_hit",
        "loaded_models",
        "model_setup",
        "serverless_concurrency",
        "provisioned_executions",
        "provisioned_utilization",
        "provisioned_invocations",
        "spillover_invocations",
        "first_byte",
        "sampled",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.invocations = 0
        self.per_instance = 0.0
        self.errors_4xx = 0
        self.errors_5xx = 0
        self.model_errors = 0
        self.model_latency = Stat()
        self.overhead_latency = Stat()
        self.cpu = Stat()
        self.memory = Stat()
        self.disk = Stat()
        self.gpu = Stat()
        self.gpu_memory = Stat()
        # multi-model endpoints (catalogue.MULTI_MODEL_METRICS)
        self.model_loading_wait = Stat()
        self.model_unloading = Stat()
        self.model_downloading = Stat()
        self.model_loading = Stat()
        self.cache_hit = Stat()
        self.loaded_models = Stat()
        # serverless endpoints
        self.model_setup = Stat()
        self.serverless_concurrency = Stat()
        self.provisioned_executions = Stat()
        self.provisioned_utilization = Stat()
        self.provisioned_invocations = Stat()
        self.spillover_invocations = Stat()
        # smlocal's own: response streams' time to first byte (not a CloudWatch metric)
        self.first_byte = Stat()
        #: metrics recorded by name (asynchronous endpoints': catalogue.ASYNC_*_METRICS)
        self.sampled: dict[str, Stat] = {}


class VariantSeries:
    """The periods and running totals of one (endpoint, variant), or of one container of a
    multi-container variant (`container`: its ContainerHostname; `model_latency` then holds its
    ContainerLatency)."""

    __slots__ = (
        "endpoint",
        "variant",
        "container",
        "instances",
        "current",
        "history",
        "invocations",
        "per_instance",
        "errors_4xx",
        "errors_5xx",
        "model_errors",
        "model_latency_sum",
        "overhead_latency_sum",
        "cpu_last",
        "memory_last",
        "disk_last",
        "gpu_last",
        "gpu_memory_last",
        "sampled_sums",
        "sampled_counts",
        "first_byte_sum",
        "first_byte_count",
    )

    def __init__(
        self, endpoint: str, variant: str, instances: int, keep: int, index: int, container: str | None = None
    ) -> None:
        self.endpoint = endpoint
        self.variant = variant
        self.container = container
        self.instances = max(instances, 1)
        self.current = Period(index)
        self.history: deque[Period] = deque(maxlen=max(keep - 1, 0))
        self.invocations = 0
        self.per_instance = 0.0
        self.errors_4xx = 0
        self.errors_5xx = 0
        self.model_errors = 0
        self.model_latency_sum = 0.0
        self.overhead_latency_sum = 0.0
        self.cpu_last: float | None = None
        self.memory_last: float | None = None
        self.disk_last: float | None = None
        self.gpu_last: float | None = None
        self.gpu_memory_last: float | None = None
        #: running sum and count of each multi-model metric (the Prometheus summaries), and
        #: LoadedModelCount's last sample per instance under "LoadedModelCount/{instance}"
        self.sampled_sums: dict[str, float] = {}
        self.sampled_counts: dict[str, int] = {}
        #: response streams: running sum (microseconds) and count of their time to first byte
        self.first_byte_sum = 0.0
        self.first_byte_count = 0

    def period(self, index: int) -> Period:
        current = self.current
        if current.index != index:
            self.history.append(current)
            current = self.current = Period(index)
        return current

    def periods(self) -> list[Period]:
        return [*self.history, self.current]
