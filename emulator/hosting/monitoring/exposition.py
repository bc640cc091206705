"""The two views of the metrics that smlocal adds to CloudWatch's: the JSON report of one endpoint
(GET /_smlocal/endpoints/{name}/metrics, `smlocal metrics`) and the Prometheus text exposition of all
(GET /metrics). See docs/metrics.md."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from emulator.hosting.monitoring.catalogue import METRICS_BY_NAME, UTILIZATION_METRICS, MetricInfo
from emulator.hosting.monitoring.series import Period, Stat, VariantSeries


def report(endpoint: str, series: Sequence[VariantSeries], period_s: float, current: int) -> dict[str, Any]:
    """The JSON view: per variant, one entry per period with CloudWatch's names and statistics
    (`current`: the index of the period now running, the one not yet complete)."""
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
    return {
        "EndpointName": endpoint,
        "PeriodSeconds": period_s,
        "Variants": [{"VariantName": s.variant, "InstanceCount": s.instances} for s in series],
        "Periods": periods,
    }


def prometheus(series: Iterable[VariantSeries]) -> str:
    """The text exposition format (version 0.0.4)."""
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
    for name, attr in UTILIZATION_METRICS.items():
        stat: Stat = getattr(p, attr)
        if stat.count:
            out[name] = stat.statistics()
    dims = [{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": variant}]
    for name, stats in out.items():
        info = METRICS_BY_NAME[name]
        stats.update({"Namespace": info.namespace, "Unit": info.unit, "Dimensions": dims})
    return out


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
