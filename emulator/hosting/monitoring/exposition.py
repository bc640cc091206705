"""The two views of the metrics that smlocal adds to CloudWatch's: the JSON report of one endpoint
(GET /_smlocal/endpoints/{name}/metrics, `smlocal metrics`) and the Prometheus text exposition of all
(GET /metrics). See docs/metrics.md."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from emulator.hosting.monitoring.catalogue import (
    METRICS_BY_NAME,
    MULTI_MODEL_METRICS,
    UTILIZATION_METRICS,
    MetricInfo,
)
from emulator.hosting.monitoring.series import Period, Stat, VariantSeries

#: smlocal's own metrics (not CloudWatch's): their namespace in `smlocal metrics` JSON.
SMLOCAL_NAMESPACE = "smlocal"
TIME_TO_FIRST_BYTE = "TimeToFirstByte"
TTFB_FAMILY = "smlocal_time_to_first_byte_microseconds"


def report(
    endpoint: str,
    series: Sequence[VariantSeries],
    period_s: float,
    current: int,
    containers: Sequence[VariantSeries] = (),
) -> dict[str, Any]:
    """The JSON view: per variant, one entry per period with CloudWatch's names and statistics
    (`current`: the index of the period now running, the one not yet complete); on a multi-container
    endpoint the same per container (`ContainerPeriods`, dimension ContainerName added)."""
    periods: list[dict[str, Any]] = []
    for s in series:
        for p in s.periods():
            periods.append(
                {
                    "Timestamp": _iso(p.index * period_s),
                    "VariantName": s.variant,
                    "Complete": p.index < current,
                    "Metrics": _period_metrics(endpoint, s.variant, p),
                }
            )
    periods.sort(key=lambda e: (e["Timestamp"], e["VariantName"]))
    out: dict[str, Any] = {
        "EndpointName": endpoint,
        "PeriodSeconds": period_s,
        "Variants": [{"VariantName": s.variant, "InstanceCount": s.instances} for s in series],
        "Periods": periods,
    }
    if containers:
        out["Containers"] = [{"VariantName": c.variant, "ContainerName": c.container} for c in containers]
        out["ContainerPeriods"] = sorted(
            (
                {
                    "Timestamp": _iso(p.index * period_s),
                    "VariantName": c.variant,
                    "ContainerName": c.container,
                    "Complete": p.index < current,
                    "Metrics": _container_metrics(endpoint, c, p),
                }
                for c in containers
                for p in c.periods()
            ),
            key=lambda e: (e["Timestamp"], e["VariantName"], e["ContainerName"]),
        )
    return out


def prometheus(series: Iterable[VariantSeries], containers: Iterable[VariantSeries] = ()) -> str:
    """The text exposition format (version 0.0.4). A container's metrics are families of their own
    (`sagemaker_container_*`, label container_name): summing a variant family never counts a
    request twice."""
    out: list[str] = []
    all_series = sorted(series, key=lambda s: (s.endpoint, s.variant))

    def family(info: MetricInfo, help_text: str, rows: Iterable[tuple[VariantSeries, str, float]]) -> None:
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
        family(METRICS_BY_NAME[name], f"SageMaker {name}. {help_text}", ((s, "", get(s)) for s in all_series))
    for name, attr, help_text in (
        ("ModelLatency", "model_latency_sum", "time of the container call"),
        ("OverheadLatency", "overhead_latency_sum", "request time minus ModelLatency"),
    ):
        rows: list[tuple[VariantSeries, str, float]] = []
        for s in all_series:
            rows.append((s, "_sum", getattr(s, attr)))
            rows.append((s, "_count", s.invocations))
        family(METRICS_BY_NAME[name], f"SageMaker {name} in microseconds: {help_text}.", rows)
    for name, attr in UTILIZATION_METRICS.items():
        gauge_rows = [(s, "", v) for s in all_series if (v := getattr(s, f"{attr}_last")) is not None]
        family(METRICS_BY_NAME[name], f"SageMaker {name}, last sample, mean over instances.", gauge_rows)
    for name in MULTI_MODEL_METRICS:
        info = METRICS_BY_NAME[name]
        mme_rows: list[tuple[VariantSeries, str, float]] = []
        for s in all_series:
            if name in s.sampled_counts:
                mme_rows.append((s, "_sum", s.sampled_sums[name]))
                mme_rows.append((s, "_count", s.sampled_counts[name]))
        family(
            info,
            f"SageMaker {name} (multi-model and serverless endpoints): sum and count of the values recorded.",
            mme_rows,
        )
    ttfb = [(s, suffix, v) for s in all_series if s.first_byte_count for suffix, v in _ttfb(s)]
    out.append(
        f"# HELP {TTFB_FAMILY} smlocal's own: response streams' time to the first byte, in microseconds."
    )
    out.append(f"# TYPE {TTFB_FAMILY} summary")
    for s, suffix, value in ttfb:
        out.append(f"{TTFB_FAMILY}{suffix}{{{_labels(s)}}} {_number(value)}")
    out.append("# HELP sagemaker_variant_instances Instances of the variant.")
    out.append("# TYPE sagemaker_variant_instances gauge")
    for s in all_series:
        out.append(f"sagemaker_variant_instances{{{_labels(s)}}} {s.instances}")
    _container_families(out, sorted(containers, key=lambda s: (s.endpoint, s.variant, s.container or "")))
    return "\n".join(out) + "\n"


#: A container's Prometheus families: (family, type, SageMaker metric, help, running total or last
#: sample attribute of its series; a summary's _count is its invocations).
_CONTAINER_FAMILIES: tuple[tuple[str, str, str, str, str], ...] = (
    (
        "sagemaker_container_invocations_total",
        "counter",
        "Invocations",
        "calls into the container",
        "invocations",
    ),
    (
        "sagemaker_container_invocation_4xx_errors_total",
        "counter",
        "Invocation4XXErrors",
        "calls the container answered with 4xx",
        "errors_4xx",
    ),
    (
        "sagemaker_container_invocation_5xx_errors_total",
        "counter",
        "Invocation5XXErrors",
        "calls the container answered with 5xx",
        "errors_5xx",
    ),
    (
        "sagemaker_container_latency_microseconds",
        "summary",
        "ContainerLatency",
        "the container call's time",
        "model_latency_sum",
    ),
    (
        "sagemaker_container_overhead_latency_microseconds",
        "summary",
        "OverheadLatency",
        "the request's time minus its ModelLatency",
        "overhead_latency_sum",
    ),
    ("sagemaker_container_cpu_utilization_percent", "gauge", "CPUUtilization", "last sample", "cpu_last"),
    (
        "sagemaker_container_memory_utilization_percent",
        "gauge",
        "MemoryUtilization",
        "last sample",
        "memory_last",
    ),
)


def _container_families(out: list[str], containers: Sequence[VariantSeries]) -> None:
    for family, kind, metric, help_text, attr in _CONTAINER_FAMILIES:
        out.append(f"# HELP {family} SageMaker {metric} per container (ContainerName): {help_text}.")
        out.append(f"# TYPE {family} {kind}")
        for c in containers:
            labels = f'{_labels(c)},container_name="{_escape(c.container or "")}"'
            value = getattr(c, attr)
            if kind == "summary":
                out.append(f"{family}_sum{{{labels}}} {_number(value)}")
                out.append(f"{family}_count{{{labels}}} {c.invocations}")
            elif value is not None:
                out.append(f"{family}{{{labels}}} {_number(value)}")


def _container_metrics(endpoint: str, c: VariantSeries, p: Period) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {"Invocations": {"Sum": p.invocations, "SampleCount": p.invocations}}
    for name, value in (("Invocation4XXErrors", p.errors_4xx), ("Invocation5XXErrors", p.errors_5xx)):
        average = value / p.invocations if p.invocations else 0.0
        out[name] = {"Sum": value, "SampleCount": p.invocations, "Average": average}
    out["ContainerLatency"] = p.model_latency.statistics()
    out["OverheadLatency"] = p.overhead_latency.statistics()
    for name, stat in (("CPUUtilization", p.cpu), ("MemoryUtilization", p.memory)):
        if stat.count:
            out[name] = stat.statistics()
    dims = [
        {"Name": "EndpointName", "Value": endpoint},
        {"Name": "VariantName", "Value": c.variant},
        {"Name": "ContainerName", "Value": c.container},
    ]
    for name, stats in out.items():
        info = METRICS_BY_NAME[name]
        stats.update({"Namespace": info.namespace, "Unit": info.unit, "Dimensions": dims})
    return out


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
    for name, attr in (*UTILIZATION_METRICS.items(), *MULTI_MODEL_METRICS.items()):
        stat: Stat = getattr(p, attr)
        if stat.count:
            out[name] = stat.statistics()
    dims = [{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": variant}]
    for name, stats in out.items():
        info = METRICS_BY_NAME[name]
        stats.update({"Namespace": info.namespace, "Unit": info.unit, "Dimensions": dims})
    if p.first_byte.count:  # smlocal's own, not a CloudWatch metric
        ttfb: dict[str, Any] = dict(p.first_byte.statistics())
        ttfb.update({"Namespace": SMLOCAL_NAMESPACE, "Unit": "Microseconds", "Dimensions": dims})
        out[TIME_TO_FIRST_BYTE] = ttfb
    return out


def _ttfb(s: VariantSeries) -> tuple[tuple[str, float], tuple[str, float]]:
    return (("_sum", s.first_byte_sum), ("_count", float(s.first_byte_count)))


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
