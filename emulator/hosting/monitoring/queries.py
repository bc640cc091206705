"""CloudWatch's metric queries on smlocal's own metrics: GetMetricStatistics and GetMetricData
(`statistics`), ListMetrics (`list_metrics`), over the periods `Metrics` keeps. Query Periods are
policy seconds, as alarm Periods are (alarms.py); timestamps are wall-clock. See docs/cloudwatch.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, datetime

from emulator.config import ServerConfig
from emulator.errors import InvalidParameterCombination, InvalidParameterValue
from emulator.hosting.monitoring.catalogue import METRICS, SeriesKey, locate
from emulator.hosting.monitoring.statistics import StatisticSet
from emulator.hosting.monitoring.store import Metrics
from emulator.model import alarm_messages
from emulator.model import alarms as al

MAX_STATISTICS_DATAPOINTS = 1440  # GetMetricStatistics' limit
_UNITS = {m.name: m.unit for m in METRICS}


class MetricQueries:
    """The metric queries; AlarmService extends it (alarms read their datapoints the same way), so
    the CloudWatch wire adapter serves every operation from one object."""

    def __init__(self, config: ServerConfig, metrics: Metrics) -> None:
        self.config = config
        self.metrics = metrics

    @staticmethod
    def _where(metric: al.Metric, unit: str | None) -> SeriesKey | None:
        """The series (a variant's or a container's) that holds the metric; None for a metric smlocal
        does not publish or a Unit other than the metric's (CloudWatch then finds no data)."""
        where = locate(metric.namespace, metric.name, metric.dimensions)
        if where is None or (unit is not None and unit != _UNITS[metric.name]):
            return None
        return where

    def _sets(self, metric: al.Metric, unit: str | None) -> dict[int, StatisticSet]:
        where = self._where(metric, unit)
        return (
            {}
            if where is None
            else self.metrics.statistic_sets(where.endpoint, where.variant, metric.name, where.container)
        )

    def _stamp(self, index: int) -> datetime:
        return datetime.fromtimestamp(index * self.metrics.period_s, UTC)

    def statistics(
        self,
        metric: al.Metric,
        unit: str | None,
        start: datetime,
        end: datetime,
        period: int,
        limit: int | None = MAX_STATISTICS_DATAPOINTS,
    ) -> list[tuple[datetime, StatisticSet]]:
        """Datapoints of `period` policy seconds from `start` (rounded down to a metric period) to
        `end` (wall-clock), oldest first; periods without data are left out."""
        base = self.config.metrics_period_s
        if period <= 0 or period % base:
            raise InvalidParameterValue(alarm_messages.bad_query_period(period, int(base)))
        if start >= end:
            raise InvalidParameterValue("The parameter StartTime must be less than the parameter EndTime.")
        real = self.metrics.period_s
        first = math.floor(start.timestamp() / real)
        stop = math.ceil(end.timestamp() / real)
        k = int(period // base)
        wanted = math.ceil((stop - first) / k)
        if limit is not None and wanted > limit:
            raise InvalidParameterCombination(alarm_messages.too_many_datapoints(wanted, limit))
        where = self._where(metric, unit)
        if where is None:
            return []
        found = self.metrics.buckets(
            where.endpoint, where.variant, metric.name, first, stop, k, where.container
        )
        return [(self._stamp(i), s) for i, s in found]

    def list_metrics(
        self, namespace: str | None, name: str | None, filters: Iterable[tuple[str, str | None]]
    ) -> list[al.Metric]:
        wanted = list(filters)
        out: list[al.Metric] = []
        for ns, metric, key in self.metrics.published():
            dims = dict(key.dimensions())
            if (namespace is None or ns == namespace) and (name is None or metric == name):
                if all(k in dims and (v is None or dims[k] == v) for k, v in wanted):
                    out.append(al.Metric(ns, metric, tuple(dims.items())))
        return sorted(out, key=lambda m: (m.namespace, m.name, m.dimensions))

    @staticmethod
    def unit_of(metric: al.Metric) -> str | None:
        return _UNITS.get(metric.name)
