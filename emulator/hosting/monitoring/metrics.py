"""SageMaker's endpoint metrics (shared/spec/hosting-contract.md §10), aggregated in memory.

Invocation metrics (namespace AWS/SageMaker) and instance metrics (/aws/sagemaker/Endpoints), per
endpoint and variant (dimensions EndpointName, VariantName), in periods of `period_s` (CloudWatch's
one minute by default) aligned on the epoch, the last `keep` periods kept. Alongside the periods,
running totals feed the Prometheus exposition (counters never go back to zero while the server runs).

`record` is on the request path: two dict lookups, one integer division, a handful of attribute
updates on __slots__ objects; a new object only when a period starts. It runs on the event loop,
so it needs no lock. CPU and memory are sampled by `sampler.Sampler`, a background task, once per period.
See docs/metrics.md.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger(__name__)

INVOCATION_NAMESPACE = "AWS/SageMaker"
INSTANCE_NAMESPACE = "/aws/sagemaker/Endpoints"

#: How a request that reached the model ended (InvocationModelErrors counts every non-OK kind).
OK = 0
CLIENT_ERROR = 4  # the model answered 4xx
SERVER_ERROR = 5  # the model answered 5xx
OTHER_ERROR = 1  # timeout, socket error, malformed or oversized answer, other non-2xx status

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


@dataclass(frozen=True)
class MetricInfo:
    name: str
    namespace: str
    unit: str
    prometheus: str  # the Prometheus family name
    kind: str  # Prometheus type


#: SageMaker's names and units, and the Prometheus family each maps to (docs/metrics.md).
METRICS: tuple[MetricInfo, ...] = (
    MetricInfo("Invocations", INVOCATION_NAMESPACE, "None", "sagemaker_invocations_total", "counter"),
    MetricInfo(
        "InvocationsPerInstance",
        INVOCATION_NAMESPACE,
        "None",
        "sagemaker_invocations_per_instance_total",
        "counter",
    ),
    MetricInfo(
        "Invocation4XXErrors",
        INVOCATION_NAMESPACE,
        "None",
        "sagemaker_invocation_4xx_errors_total",
        "counter",
    ),
    MetricInfo(
        "Invocation5XXErrors",
        INVOCATION_NAMESPACE,
        "None",
        "sagemaker_invocation_5xx_errors_total",
        "counter",
    ),
    MetricInfo(
        "InvocationModelErrors",
        INVOCATION_NAMESPACE,
        "None",
        "sagemaker_invocation_model_errors_total",
        "counter",
    ),
    MetricInfo(
        "ModelLatency",
        INVOCATION_NAMESPACE,
        "Microseconds",
        "sagemaker_model_latency_microseconds",
        "summary",
    ),
    MetricInfo(
        "OverheadLatency",
        INVOCATION_NAMESPACE,
        "Microseconds",
        "sagemaker_overhead_latency_microseconds",
        "summary",
    ),
    MetricInfo("CPUUtilization", INSTANCE_NAMESPACE, "Percent", "sagemaker_cpu_utilization_percent", "gauge"),
    MetricInfo(
        "MemoryUtilization", INSTANCE_NAMESPACE, "Percent", "sagemaker_memory_utilization_percent", "gauge"
    ),
)
_INFO = {m.name: m for m in METRICS}
COUNT_METRICS = frozenset(
    {
        "Invocations",
        "InvocationsPerInstance",
        "Invocation4XXErrors",
        "Invocation5XXErrors",
        "InvocationModelErrors",
    }
)


class VariantSeries:
    """The periods and running totals of one (endpoint, variant)."""

    __slots__ = (
        "endpoint",
        "variant",
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
    )

    def __init__(self, endpoint: str, variant: str, instances: int, keep: int, index: int) -> None:
        self.endpoint = endpoint
        self.variant = variant
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

    def period(self, index: int) -> Period:
        current = self.current
        if current.index != index:
            self.history.append(current)
            current = self.current = Period(index)
        return current

    def periods(self) -> list[Period]:
        return [*self.history, self.current]


@dataclass(frozen=True)
class StatisticSet:
    """One datapoint as CloudWatch stores it (SampleCount, Sum, Minimum, Maximum). A count metric's
    period without requests is the zero set (SageMaker publishes zeros): SampleCount 0, every
    statistic 0, as `Metrics.datapoint` reads it."""

    sample_count: float
    sum: float
    minimum: float
    maximum: float

    def value(self, statistic: str) -> float | None:
        if statistic == "SampleCount":
            return self.sample_count
        if statistic == "Sum":
            return self.sum
        if statistic == "Average":
            return self.sum / self.sample_count if self.sample_count else 0.0
        if statistic == "Minimum":
            return self.minimum
        if statistic == "Maximum":
            return self.maximum
        return None


ZERO_SET = StatisticSet(0.0, 0.0, 0.0, 0.0)


def merge_sets(sets: Iterable[StatisticSet]) -> StatisticSet | None:
    """The statistic set of several periods together (a longer Period); None when there are none.
    Minimum and Maximum come from the periods with samples (zero sets only when all are)."""
    items = list(sets)
    if not items:
        return None
    sampled = [s for s in items if s.sample_count]
    if not sampled:
        return ZERO_SET
    return StatisticSet(
        sum(s.sample_count for s in sampled),
        sum(s.sum for s in sampled),
        min(s.minimum for s in sampled),
        max(s.maximum for s in sampled),
    )


def locate(namespace: str, name: str, dimensions: Iterable[tuple[str, str]]) -> tuple[str, str] | None:
    """The (endpoint, variant) of a CloudWatch metric smlocal publishes, else None. Dimensions must
    be exactly EndpointName and VariantName, in any order, as CloudWatch matches them."""
    info = _INFO.get(name)
    dims = dict(dimensions)
    if info is None or info.namespace != namespace or set(dims) != {"EndpointName", "VariantName"}:
        return None
    return dims["EndpointName"], dims["VariantName"]


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
        #: Faults that could not be attributed to a variant (docs/metrics.md).
        self.unattributed = 0

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
            p.model_errors += 1
            series.model_errors += 1
            if outcome == CLIENT_ERROR:
                p.errors_4xx += 1
                series.errors_4xx += 1
            elif outcome == SERVER_ERROR:
                p.errors_5xx += 1
                series.errors_5xx += 1

    # ------------------------------------------------------------------ off the request path

    def set_instances(self, endpoint: str, variant: str, count: int) -> None:
        series = self._get(endpoint, variant, int(self._clock() // self.period_s))
        series.instances = max(count, 1)

    def record_utilization(
        self, endpoint: str, variant: str, cpu: float | None, memory: float | None
    ) -> None:
        """One instance's sample (percent; CPU summed over cores)."""
        index = int(self._clock() // self.period_s)
        series = self._get(endpoint, variant, index)
        p = series.period(index)
        if cpu is not None:
            p.cpu.add(cpu)
            series.cpu_last = cpu
        if memory is not None:
            p.memory.add(memory)
            series.memory_last = memory

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

    def datapoint(self, endpoint: str, variant: str, name: str, statistic: str, index: int) -> float | None:
        """One statistic of one metric in one period, as a CloudWatch alarm reads it. Invocation
        counts of a period without requests are 0 (SageMaker emits zeros); latencies and
        utilisation without samples are missing (None)."""
        series = self._series.get(endpoint, {}).get(variant)
        period = None
        if series is not None:
            period = next((p for p in series.periods() if p.index == index), None)
        stats = _statistic_set(name, period if period is not None else Period(index))
        return None if stats is None else stats.value(statistic)

    def forget(self, endpoint: str) -> None:
        self._series.pop(endpoint, None)

    def series(self, endpoint: str | None = None) -> list[VariantSeries]:
        if endpoint is not None:
            return list(self._series.get(endpoint, {}).values())
        return [s for variants in self._series.values() for s in variants.values()]

    def endpoints(self) -> list[str]:
        return list(self._series)

    # ------------------------------------------------------------------ CloudWatch's view (alarms, queries)

    def statistic_sets(self, endpoint: str, variant: str, name: str) -> dict[int, StatisticSet]:
        """One metric's datapoints by period index, over the periods kept (the current, incomplete
        one included). Count metrics have the zero set for periods without requests from the first
        period the series has seen; other metrics only where they have samples. Empty for a variant
        smlocal has not seen."""
        series = self._series.get(endpoint, {}).get(variant)
        if series is None or name not in _INFO:
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
                found = _statistic_set(name, p)
                if found is not None:
                    out[p.index] = found
        return out

    def buckets(
        self, endpoint: str, variant: str, name: str, first: int, end: int, k: int
    ) -> list[tuple[int, StatisticSet]]:
        """One metric's datapoints for a Period of `k` metric periods: buckets of periods
        [first + j*k, first + (j+1)*k) that start before period `end`, each merged from the periods
        kept, oldest first, by the index of their first period; buckets without data are left out."""
        if k <= 0:
            raise ValueError("k must be positive")
        sets = self.statistic_sets(endpoint, variant, name)
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

    def published(self) -> list[tuple[str, str, str, str]]:
        """(namespace, metric, endpoint, variant) of every metric with data among the kept periods."""
        out: list[tuple[str, str, str, str]] = []
        for s in self.series():
            for info in METRICS:
                if self.statistic_sets(s.endpoint, s.variant, info.name):
                    out.append((info.namespace, info.name, s.endpoint, s.variant))
        return out

    # ------------------------------------------------------------------ exposition

    def report(self, endpoint: str) -> dict[str, Any]:
        """The JSON view: per variant, one entry per period with CloudWatch's names and statistics."""
        current = int(self._clock() // self.period_s)
        periods: list[dict[str, Any]] = []
        for series in self.series(endpoint):
            for p in series.periods():
                periods.append(
                    {
                        "Timestamp": _iso(p.index * self.period_s),
                        "VariantName": series.variant,
                        "Complete": p.index < current,
                        "Metrics": _period_metrics(endpoint, series.variant, p),
                    }
                )
        periods.sort(key=lambda e: (e["Timestamp"], e["VariantName"]))
        return {
            "EndpointName": endpoint,
            "PeriodSeconds": self.period_s,
            "Variants": [
                {"VariantName": s.variant, "InstanceCount": s.instances} for s in self.series(endpoint)
            ],
            "Periods": periods,
        }

    def prometheus(self) -> str:
        """The text exposition format (version 0.0.4)."""
        out: list[str] = []
        all_series = sorted(self.series(), key=lambda s: (s.endpoint, s.variant))

        def family(
            info: MetricInfo, help_text: str, rows: Iterable[tuple[VariantSeries, str, float]]
        ) -> None:
            out.append(f"# HELP {info.prometheus} {help_text}")
            out.append(f"# TYPE {info.prometheus} {info.kind}")
            for s, suffix, value in rows:
                out.append(f"{info.prometheus}{suffix}{{{_labels(s)}}} {_number(value)}")

        counters: tuple[tuple[str, str, Callable[[VariantSeries], float]], ...] = (
            ("Invocations", "InvokeEndpoint requests sent to the model.", lambda s: s.invocations),
            (
                "InvocationsPerInstance",
                "Invocations, each divided by the variant's instance count at the time.",
                lambda s: s.per_instance,
            ),
            ("Invocation4XXErrors", "Requests the model answered with 4xx.", lambda s: s.errors_4xx),
            ("Invocation5XXErrors", "Requests the model answered with 5xx.", lambda s: s.errors_5xx),
            (
                "InvocationModelErrors",
                "Requests without a 2xx answer from the model (incl. timeouts, socket errors).",
                lambda s: s.model_errors,
            ),
        )
        for name, help_text, get in counters:
            family(_INFO[name], f"SageMaker {name}. {help_text}", ((s, "", get(s)) for s in all_series))
        for name, attr, help_text in (
            ("ModelLatency", "model_latency_sum", "time of the container call"),
            ("OverheadLatency", "overhead_latency_sum", "request time minus ModelLatency"),
        ):
            rows: list[tuple[VariantSeries, str, float]] = []
            for s in all_series:
                rows.append((s, "_sum", getattr(s, attr)))
                rows.append((s, "_count", s.invocations))
            family(_INFO[name], f"SageMaker {name} in microseconds: {help_text}.", rows)
        for name, attr in (("CPUUtilization", "cpu_last"), ("MemoryUtilization", "memory_last")):
            gauge_rows = [(s, "", v) for s in all_series if (v := getattr(s, attr)) is not None]
            family(_INFO[name], f"SageMaker {name}, last sample, mean over instances.", gauge_rows)
        out.append("# HELP sagemaker_variant_instances Instances of the variant.")
        out.append("# TYPE sagemaker_variant_instances gauge")
        for s in all_series:
            out.append(f"sagemaker_variant_instances{{{_labels(s)}}} {s.instances}")
        return "\n".join(out) + "\n"


def _period_metrics(endpoint: str, variant: str, p: Period) -> dict[str, dict[str, Any]]:
    counts = {
        "Invocations": p.invocations,
        "InvocationsPerInstance": p.per_instance,
        "Invocation4XXErrors": p.errors_4xx,
        "Invocation5XXErrors": p.errors_5xx,
        "InvocationModelErrors": p.model_errors,
    }
    out: dict[str, dict[str, Any]] = {}
    for name, value in counts.items():
        stats: dict[str, Any] = {"Sum": value, "SampleCount": p.invocations}
        if name.endswith("Errors"):
            stats["Average"] = value / p.invocations if p.invocations else 0.0
        out[name] = stats
    out["ModelLatency"] = p.model_latency.statistics()
    out["OverheadLatency"] = p.overhead_latency.statistics()
    if p.cpu.count:
        out["CPUUtilization"] = p.cpu.statistics()
    if p.memory.count:
        out["MemoryUtilization"] = p.memory.statistics()
    dims = [{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": variant}]
    for name, stats in out.items():
        info = _INFO[name]
        stats.update({"Namespace": info.namespace, "Unit": info.unit, "Dimensions": dims})
    return out


def _statistic_set(name: str, p: Period) -> StatisticSet | None:
    """A period's statistic set of one metric. A count metric's per-request datapoints are 1
    (Invocations), 1/instances (InvocationsPerInstance) or 0/1 (the error counts)."""
    if name in COUNT_METRICS:
        n = p.invocations
        if not n:
            return ZERO_SET
        if name == "Invocations":
            return StatisticSet(float(n), float(n), 1.0, 1.0)
        if name == "InvocationsPerInstance":
            share = p.per_instance / n  # exact while the instance count held through the period
            return StatisticSet(float(n), p.per_instance, share, share)
        errors = {
            "Invocation4XXErrors": p.errors_4xx,
            "Invocation5XXErrors": p.errors_5xx,
            "InvocationModelErrors": p.model_errors,
        }[name]
        return StatisticSet(float(n), float(errors), 1.0 if errors == n else 0.0, 1.0 if errors else 0.0)
    stat = {
        "ModelLatency": p.model_latency,
        "OverheadLatency": p.overhead_latency,
        "CPUUtilization": p.cpu,
        "MemoryUtilization": p.memory,
    }.get(name)
    if stat is None or not stat.count:
        return None
    return StatisticSet(float(stat.count), stat.sum, stat.min, stat.max)


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat().replace("+00:00", "Z")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(s: VariantSeries) -> str:
    return f'endpoint_name="{_escape(s.endpoint)}",variant_name="{_escape(s.variant)}"'


def _number(value: float) -> str:
    if isinstance(value, int) or value.is_integer():
        return str(int(value))
    return repr(value)
