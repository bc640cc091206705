"""Statistic sets, as CloudWatch stores a datapoint (SampleCount, Sum, Minimum, Maximum): one metric's
set for one period, and several periods merged into a longer one (alarms, GetMetricStatistics)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from emulator.hosting.monitoring.catalogue import COUNT_METRICS, MULTI_MODEL_METRICS, UTILIZATION_METRICS
from emulator.hosting.monitoring.series import Period, Stat


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


def statistic_set(name: str, p: Period) -> StatisticSet | None:
    """A period's statistic set of one metric. A count metric's per-request datapoints are 1
    (Invocations), 1/instances (InvocationsPerInstance; a component's InvocationsPerCopy: 1/copies)
    or 0/1 (the error counts)."""
    if name in COUNT_METRICS:
        n = p.invocations
        if not n:
            return ZERO_SET
        if name == "Invocations":
            return StatisticSet(float(n), float(n), 1.0, 1.0)
        if name in ("InvocationsPerInstance", "InvocationsPerCopy"):  # a component's: per copy
            share = p.per_instance / n  # exact while the instance count held through the period
            return StatisticSet(float(n), p.per_instance, share, share)
        errors = {
            "Invocation4XXErrors": p.errors_4xx,
            "Invocation5XXErrors": p.errors_5xx,
            "InvocationModelErrors": p.model_errors,
        }[name]
        return StatisticSet(float(n), float(errors), 1.0 if errors == n else 0.0, 1.0 if errors else 0.0)
    stat: Stat
    if name in ("ModelLatency", "ContainerLatency"):  # a container's series keeps its time there
        stat = p.model_latency
    elif name == "OverheadLatency":
        stat = p.overhead_latency
    elif name in UTILIZATION_METRICS:
        stat = getattr(p, UTILIZATION_METRICS[name])
    elif name in MULTI_MODEL_METRICS:
        stat = getattr(p, MULTI_MODEL_METRICS[name])
    elif name in p.sampled:
        stat = p.sampled[name]
    else:
        return None
    if not stat.count:
        return None
    return StatisticSet(float(stat.count), stat.sum, stat.min, stat.max)
