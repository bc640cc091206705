"""The metric catalogue: SageMaker's endpoint metrics (shared/spec/hosting-contract.md §10) as smlocal
publishes them, with their namespaces, units and Prometheus families (docs/metrics.md).

Invocation metrics (namespace AWS/SageMaker) and instance metrics (/aws/sagemaker/Endpoints), per
endpoint and variant (dimensions EndpointName, VariantName).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

INVOCATION_NAMESPACE = "AWS/SageMaker"
INSTANCE_NAMESPACE = "/aws/sagemaker/Endpoints"


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
    MetricInfo(
        "DiskUtilization", INSTANCE_NAMESPACE, "Percent", "sagemaker_disk_utilization_percent", "gauge"
    ),
    MetricInfo("GPUUtilization", INSTANCE_NAMESPACE, "Percent", "sagemaker_gpu_utilization_percent", "gauge"),
    MetricInfo(
        "GPUMemoryUtilization",
        INSTANCE_NAMESPACE,
        "Percent",
        "sagemaker_gpu_memory_utilization_percent",
        "gauge",
    ),
)
#: The catalogue by metric name.
METRICS_BY_NAME = {m.name: m for m in METRICS}
COUNT_METRICS = frozenset(
    {
        "Invocations",
        "InvocationsPerInstance",
        "Invocation4XXErrors",
        "Invocation5XXErrors",
        "InvocationModelErrors",
    }
)


#: The instance metrics (sampled, one statistic set per period): metric name -> the attribute that
#: holds it on a Period and, with `_last`, on a VariantSeries (series.py). GPU metrics only for
#: instances with GPUs: without, no datapoint at all (docs/metrics.md).
UTILIZATION_METRICS: dict[str, str] = {
    "CPUUtilization": "cpu",
    "MemoryUtilization": "memory",
    "DiskUtilization": "disk",
    "GPUUtilization": "gpu",
    "GPUMemoryUtilization": "gpu_memory",
}


def locate(namespace: str, name: str, dimensions: Iterable[tuple[str, str]]) -> tuple[str, str] | None:
    """The (endpoint, variant) of a CloudWatch metric smlocal publishes, else None. Dimensions must
    be exactly EndpointName and VariantName, in any order, as CloudWatch matches them."""
    info = METRICS_BY_NAME.get(name)
    dims = dict(dimensions)
    if info is None or info.namespace != namespace or set(dims) != {"EndpointName", "VariantName"}:
        return None
    return dims["EndpointName"], dims["VariantName"]
