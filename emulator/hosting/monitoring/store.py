"""The metric store: SageMaker's endpoint metrics (docs/metrics.md) aggregated in memory, per endpoint
and variant (and per container of a multi-container variant), in periods of `period_s` (CloudWatch's
one minute by default) aligned on the epoch, the last `keep` periods kept. Alongside the periods,
running totals feed the Prometheus exposition (counters never go back to zero while the server runs).

`record` is on the request path: two dict lookups, one integer division, a handful of attribute
updates on __slots__ objects; a new object only when a period starts. It runs on the event loop,
so it needs no lock. CPU, memory, disk and GPU use are sampled by `sampler.Sampler`, a background
task, once per period.
See docs/metrics.md.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from emulator.hosting.monitoring import exposition
from emulator.hosting.monitoring.catalogue import (
    COMPONENT_LEVEL,
    COUNT_METRICS,
    ENDPOINT_LEVEL,
    METRICS,
    METRICS_BY_NAME,
    MULTI_MODEL_METRICS,
    NOT_FOR_ASYNC,
    SeriesKey,
    applies,
)
from emulator.hosting.monitoring.series import Period, Stat, VariantSeries
from emulator.hosting.monitoring.statistics import ZERO_SET, StatisticSet, merge_sets, statistic_set

log = logging.getLogger(__name__)

#: How a request that reached the model ended (InvocationModelErrors counts every non-OK kind).
OK = 0
CLIENT_ERROR = 4  # the model answered 4xx
SERVER_ERROR = 5  # the model answered 5xx
OTHER_ERROR = 1  # timeout, socket error, malformed or oversized answer, other non-2xx status


def _count_error(p: Period, series: VariantSeries, outcome: int) -> None:
    """A request (or a container call) that did not end OK, in its period and in the totals."""
    p.model_errors += 1
    series.model_errors += 1
    if outcome == CLIENT_ERROR:
        p.errors_4xx += 1
        series.errors_4xx += 1
    elif outcome == SERVER_ERROR:
        p.errors_5xx += 1
        series.errors_5xx += 1


class Metrics:
    """All endpoints' series. `clock` is epoch seconds (periods align on it, as CloudWatch's minutes)."""

    def __init__(
        self,
        period_s: float = 60.0,
        keep: int = 60,
        clock: Callable[[], float] = time.time,
        instance_count: Callable[[str, str], int] | None = None,
    ) -> None:
        if period_s <= 0:
            raise ValueError("period_s must be positive")
        self.period_s = period_s
        self.keep = keep
        self._clock = clock
        #: Resolves a variant's instance count the first time a series is seen (later: `set_instances`).
        self.instance_count = instance_count
        self._series: dict[str, dict[str, VariantSeries]] = {}
        #: endpoint -> (variant, ContainerHostname) -> that container's series (multi-container only).
        self._containers: dict[str, dict[tuple[str, str], VariantSeries]] = {}
        #: Faults that could not be attributed to a variant (docs/metrics.md).
        self.unattributed = 0
        #: endpoint -> its own series (the async queue metrics, SeriesKey variant ENDPOINT_LEVEL)
        self._endpoint_series: dict[str, VariantSeries] = {}
        #: asynchronous endpoints: NOT_FOR_ASYNC is not published for them
        self.async_endpoints: set[str] = set()
        #: lower-cased inference component name -> its series (SeriesKey variant COMPONENT_LEVEL)
        self._component_series: dict[str, VariantSeries] = {}

    # ------------------------------------------------------------------ the request path

    def _get(self, endpoint: str, variant: str, index: int) -> VariantSeries:
        variants = self._series.get(endpoint)
        if variants is None:
            variants = self._series[endpoint] = {}
        series = variants.get(variant)
        if series is None:
            count = self.instance_count(endpoint, variant) if self.instance_count is not None else 1
            series = variants[variant] = VariantSeries(endpoint, variant, count, self.keep, index)
        return series

    def record(self, endpoint: str, variant: str, outcome: int, model_s: float, total_s: float) -> None:
        """One request that reached the model: its outcome, the container call's and the whole
        request's durations in seconds."""
        index = int(self._clock() // self.period_s)
        variants = self._series.get(endpoint)
        series = variants.get(variant) if variants is not None else None
        if series is None:
            series = self._get(endpoint, variant, index)
        p = series.current if series.current.index == index else series.period(index)
        share = 1.0 / series.instances
        model_us = model_s * 1e6
        overhead_us = (total_s - model_s) * 1e6
        if overhead_us < 0.0:
            overhead_us = 0.0
        p.invocations += 1
        p.per_instance += share
        # Stat.add inlined for the period's statistics (a method call each costs more than the work)
        st = p.model_latency
        st.sum += model_us
        st.count += 1
        if model_us < st.min:
            st.min = model_us
        if model_us > st.max:
            st.max = model_us
        st = p.overhead_latency
        st.sum += overhead_us
        st.count += 1
        if overhead_us < st.min:
            st.min = overhead_us
        if overhead_us > st.max:
            st.max = overhead_us
        series.invocations += 1
        series.per_instance += share
        series.model_latency_sum += model_us
        series.overhead_latency_sum += overhead_us
        if outcome:
            _count_error(p, series, outcome)

    def record_container(
        self, endpoint: str, variant: str, container: str, outcome: int, container_s: float, overhead_s: float
    ) -> None:
        """One call into one container of a multi-container instance (a Direct call, or one hop of a
        pipeline): its outcome and time (ContainerLatency), and the request's OverheadLatency."""
        index = int(self._clock() // self.period_s)
        series = self._container_series(endpoint, variant, container, index)
        p = series.period(index)
        p.invocations += 1
        p.model_latency.add(container_s * 1e6)
        p.overhead_latency.add(max(overhead_s, 0.0) * 1e6)
        series.invocations += 1
        series.model_latency_sum += container_s * 1e6
        series.overhead_latency_sum += max(overhead_s, 0.0) * 1e6
        if outcome:
            _count_error(p, series, outcome)

    def _container_series(self, endpoint: str, variant: str, container: str, index: int) -> VariantSeries:
        containers = self._containers.setdefault(endpoint, {})
        series = containers.get((variant, container))
        if series is None:
            series = containers[(variant, container)] = VariantSeries(
                endpoint, variant, 1, self.keep, index, container
            )
        return series

    def _component(self, component: str, index: int) -> VariantSeries:
        series = self._component_series.get(component.lower())
        if series is None:
            series = self._component_series[component.lower()] = VariantSeries(
                component, COMPONENT_LEVEL, 1, self.keep, index
            )
        return series

    def record_component(
        self, component: str, copies: int, outcome: int, model_s: float, total_s: float
    ) -> None:
        """One request an inference component answered (or failed), besides its variant's record:
        its outcome and durations, and its share of the `copies` in rotation (InvocationsPerCopy)."""
        index = int(self._clock() // self.period_s)
        series = self._component(component, index)
        series.instances = max(copies, 1)
        p = series.period(index)
        share = 1.0 / series.instances
        model_us = model_s * 1e6
        overhead_us = max(total_s - model_s, 0.0) * 1e6
        p.invocations += 1
        p.per_instance += share
        p.model_latency.add(model_us)
        p.overhead_latency.add(overhead_us)
        series.invocations += 1
        series.per_instance += share
        series.model_latency_sum += model_us
        series.overhead_latency_sum += overhead_us
        if outcome:
            _count_error(p, series, outcome)

    def record_component_value(self, component: str, name: str, value: float) -> None:
        """One value of a component's sampled metric: a NoCapacityInvocationFailures (1 per refused
        request), a ConcurrentRequestsPerCopy sample."""
        index = int(self._clock() // self.period_s)
        series = self._component(component, index)
        _add_sample(series, index, name, value)

    def forget_component(self, component: str) -> None:
        """A deleted component's metrics go missing (as a deleted endpoint's)."""
        self._component_series.pop(component.lower(), None)

    def component_series(self) -> list[VariantSeries]:
        return list(self._component_series.values())

    # ------------------------------------------------------------------ off the request path

    def set_instances(self, endpoint: str, variant: str, count: int) -> None:
        series = self._get(endpoint, variant, int(self._clock() // self.period_s))
        series.instances = max(count, 1)

    def record_utilization(
        self,
        endpoint: str,
        variant: str,
        cpu: float | None,
        memory: float | None,
        *,
        disk: float | None = None,
        gpu: float | None = None,
        gpu_memory: float | None = None,
        container: str | None = None,
    ) -> None:
        """One instance's sample (percent; CPU summed over cores, GPU figures summed over GPUs), or
        with `container` one container's CPU and memory. None: not measured this time (no datapoint)."""
        index = int(self._clock() // self.period_s)
        if container is None:
            series = self._get(endpoint, variant, index)
        else:
            series = self._container_series(endpoint, variant, container, index)
        p = series.period(index)
        for attr, value in (
            ("cpu", cpu),
            ("memory", memory),
            ("disk", disk),
            ("gpu", gpu),
            ("gpu_memory", gpu_memory),
        ):
            if value is not None:
                stat: Stat = getattr(p, attr)
                stat.add(value)
                setattr(series, f"{attr}_last", value)

    def record_model_metric(self, endpoint: str, variant: str, name: str, value: float) -> None:
        """One value of a multi-model metric (catalogue.MULTI_MODEL_METRICS): a time in seconds
        (recorded in microseconds), a cache hit (1) or miss (0), an instance's loaded model count."""
        attr = MULTI_MODEL_METRICS[name]
        if METRICS_BY_NAME[name].unit == "Microseconds":
            value *= 1e6
        index = int(self._clock() // self.period_s)
        series = self._get(endpoint, variant, index)
        stat: Stat = getattr(series.period(index), attr)
        stat.add(value)
        series.sampled_sums[name] = series.sampled_sums.get(name, 0.0) + value
        series.sampled_counts[name] = series.sampled_counts.get(name, 0) + 1

    def record_first_byte(self, endpoint: str, variant: str, seconds: float) -> None:
        """A response stream's time from the request to the container's first byte (smlocal's own
        metric: TimeToFirstByte in `smlocal metrics`, smlocal_time_to_first_byte_* in /metrics)."""
        index = int(self._clock() // self.period_s)
        series = self._get(endpoint, variant, index)
        series.period(index).first_byte.add(seconds * 1e6)
        series.first_byte_sum += seconds * 1e6
        series.first_byte_count += 1

    def record_async(self, endpoint: str, variant: str | None, name: str, value: float) -> None:
        """One value of an asynchronous endpoint's metric: of the endpoint (`variant` None: the queue
        metrics) or of a variant; a count is recorded as 1 per event."""
        self.async_endpoints.add(endpoint)
        index = int(self._clock() // self.period_s)
        if variant is None:
            series = self._endpoint_series.get(endpoint)
            if series is None:
                series = self._endpoint_series[endpoint] = VariantSeries(
                    endpoint, ENDPOINT_LEVEL, 1, self.keep, index
                )
        else:
            series = self._get(endpoint, variant, index)
        _add_sample(series, index, name, value)

    async def after_each_period(self, evaluate: Callable[[], None], what: str) -> None:
        """Call `evaluate` just after each period closes, as CloudWatch evaluates complete
        datapoints, until cancelled; a failing call is logged and the next period tried."""
        period = self.period_s
        while True:
            now = self._clock()
            await asyncio.sleep((int(now // period) + 1) * period - now + min(0.05 * period, 1.0))
            try:
                evaluate()
            except Exception:  # noqa: BLE001 - one bad evaluation must not stop the next ones
                log.exception("%s failed", what)

    def period_index(self) -> int:
        """The index of the period now running (periods align on the epoch)."""
        return int(self._clock() // self.period_s)

    def datapoint(
        self, endpoint: str, variant: str, name: str, statistic: str, index: int, container: str | None = None
    ) -> float | None:
        """One statistic of one metric in one period (of a variant or one of its containers), as a
        CloudWatch alarm reads it. Invocation counts of a period without requests are 0 (SageMaker
        emits zeros); latencies and utilisation without samples are missing (None)."""
        key = SeriesKey(endpoint, variant, container)
        if not applies(name, key):
            return None
        series = self._find(key)
        period = None
        if series is not None:
            period = next((p for p in series.periods() if p.index == index), None)
        stats = statistic_set(name, period if period is not None else Period(index))
        return None if stats is None else stats.value(statistic)

    def forget(self, endpoint: str) -> None:
        self._series.pop(endpoint, None)
        self._containers.pop(endpoint, None)
        self._endpoint_series.pop(endpoint, None)
        self.async_endpoints.discard(endpoint)

    def series(self, endpoint: str | None = None) -> list[VariantSeries]:
        if endpoint is not None:
            return list(self._series.get(endpoint, {}).values())
        return [s for variants in self._series.values() for s in variants.values()]

    def container_series(self, endpoint: str | None = None) -> list[VariantSeries]:
        """The per-container series (multi-container endpoints), of one endpoint or of all."""
        if endpoint is not None:
            return list(self._containers.get(endpoint, {}).values())
        return [s for containers in self._containers.values() for s in containers.values()]

    def _find(self, key: SeriesKey) -> VariantSeries | None:
        if key.variant == ENDPOINT_LEVEL:
            return self._endpoint_series.get(key.endpoint)
        if key.variant == COMPONENT_LEVEL:
            return self._component_series.get(key.endpoint.lower())
        if key.container is None:
            return self._series.get(key.endpoint, {}).get(key.variant)
        return self._containers.get(key.endpoint, {}).get((key.variant, key.container))

    def endpoints(self) -> list[str]:
        return list(self._series)

    # ------------------------------------------------------------------ CloudWatch's view (alarms, queries)

    def statistic_sets(
        self, endpoint: str, variant: str, name: str, container: str | None = None
    ) -> dict[int, StatisticSet]:
        """One metric's datapoints by period index, over the periods kept (the current, incomplete
        one included), of a variant or (`container`) of one of its containers. Count metrics have
        the zero set for periods without requests from the first period the series has seen; other
        metrics only where they have samples. Empty for a series smlocal has not seen or a metric it
        does not publish for it."""
        key = SeriesKey(endpoint, variant, container)
        series = self._find(key)
        if series is None or name not in METRICS_BY_NAME or not applies(name, key):
            return {}
        if name in NOT_FOR_ASYNC and endpoint in self.async_endpoints and variant != COMPONENT_LEVEL:
            return {}
        now = self.period_index()
        periods = series.periods()
        first = max(periods[0].index, now - self.keep + 1)
        out: dict[int, StatisticSet] = {}
        if name in COUNT_METRICS:
            for index in range(first, now + 1):
                out[index] = ZERO_SET
        for p in periods:
            if first <= p.index <= now:
                found = statistic_set(name, p)
                if found is not None:
                    out[p.index] = found
        return out

    def buckets(
        self,
        endpoint: str,
        variant: str,
        name: str,
        first: int,
        end: int,
        k: int,
        container: str | None = None,
    ) -> list[tuple[int, StatisticSet]]:
        """One metric's datapoints for a Period of `k` metric periods: buckets of periods
        [first + j*k, first + (j+1)*k) that start before period `end`, each merged from the periods
        kept, oldest first, by the index of their first period; buckets without data are left out."""
        if k <= 0:
            raise ValueError("k must be positive")
        sets = self.statistic_sets(endpoint, variant, name, container)
        if not sets:
            return []
        lo, hi = min(sets), max(sets)
        start = first + max(0, (lo - first) // k) * k
        out: list[tuple[int, StatisticSet]] = []
        while start < end and start <= hi:
            merged = merge_sets(sets[i] for i in range(start, start + k) if i in sets)
            if merged is not None:
                out.append((start, merged))
            start += k
        return out

    def published(self) -> list[tuple[str, str, SeriesKey]]:
        """(namespace, metric, series) of every metric with data among the kept periods."""
        out: list[tuple[str, str, SeriesKey]] = []
        for s in (
            *self.series(),
            *self.container_series(),
            *self._endpoint_series.values(),
            *self._component_series.values(),
        ):
            for info in METRICS:
                if self.statistic_sets(s.endpoint, s.variant, info.name, s.container):
                    out.append((info.namespace, info.name, SeriesKey(s.endpoint, s.variant, s.container)))
        return out

    # ------------------------------------------------------------------ exposition (exposition.py)

    def report(self, endpoint: str) -> dict[str, Any]:
        """The JSON view: per variant, one entry per period with CloudWatch's names and statistics."""
        return exposition.report(
            endpoint,
            self.series(endpoint),
            self.period_s,
            self.period_index(),
            self.container_series(endpoint),
        )

    def prometheus(self) -> str:
        """The text exposition format (version 0.0.4)."""
        return exposition.prometheus(self.series(), self.container_series())


def _add_sample(series: VariantSeries, index: int, name: str, value: float) -> None:
    """One value of a sampled metric into its period's statistic and the series' running sums."""
    period = series.period(index)
    stat = period.sampled.get(name)
    if stat is None:
        stat = period.sampled[name] = Stat()
    stat.add(value)
    series.sampled_sums[name] = series.sampled_sums.get(name, 0.0) + value
    series.sampled_counts[name] = series.sampled_counts.get(name, 0) + 1
