"""The metric catalogue: SageMaker's endpoint metrics (shared/spec/hosting-contract.md §10) as smlocal
publishes them, with their namespaces, units and Prometheus families (docs/metrics.md).

Invocation metrics (namespace AWS/SageMaker) and instance metrics (/aws/sagemaker/Endpoints), per
endpoint and variant (dimensions EndpointName, VariantName), and on multi-container endpoints per
container too (EndpointName, VariantName, ContainerName: spec §4): Invocations, the 4XX/5XX error
counts, ContainerLatency, OverheadLatency, CPUUtilization and MemoryUtilization. An inference
component's invocation metrics have the dimension InferenceComponentName alone (COMPONENT_METRICS).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

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
    MetricInfo(
        "ContainerLatency",
        INVOCATION_NAMESPACE,
        "Microseconds",
        "sagemaker_container_latency_microseconds",
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
    # multi-model endpoints (spec §5): per variant, no per-model metrics
    MetricInfo(
        "ModelLoadingWaitTime",
        INVOCATION_NAMESPACE,
        "Microseconds",
        "sagemaker_model_loading_wait_time_microseconds",
        "summary",
    ),
    MetricInfo(
        "ModelUnloadingTime",
        INVOCATION_NAMESPACE,
        "Microseconds",
        "sagemaker_model_unloading_time_microseconds",
        "summary",
    ),
    MetricInfo(
        "ModelDownloadingTime",
        INVOCATION_NAMESPACE,
        "Microseconds",
        "sagemaker_model_downloading_time_microseconds",
        "summary",
    ),
    MetricInfo(
        "ModelLoadingTime",
        INVOCATION_NAMESPACE,
        "Microseconds",
        "sagemaker_model_loading_time_microseconds",
        "summary",
    ),
    MetricInfo("ModelCacheHit", INVOCATION_NAMESPACE, "None", "sagemaker_model_cache_hit", "summary"),
    # the Prometheus view: a summary of the instances' samples, as the other multi-model metrics
    MetricInfo("LoadedModelCount", INSTANCE_NAMESPACE, "None", "sagemaker_loaded_model_count", "summary"),
    # asynchronous endpoints (spec §8): the queue's, per endpoint (dimension EndpointName only)
    MetricInfo(
        "ApproximateBacklogSize", INVOCATION_NAMESPACE, "None", "sagemaker_async_backlog_size", "summary"
    ),
    MetricInfo(
        "ApproximateBacklogSizePerInstance",
        INVOCATION_NAMESPACE,
        "None",
        "sagemaker_async_backlog_size_per_instance",
        "summary",
    ),
    MetricInfo(
        "ApproximateAgeOfOldestRequest",
        INVOCATION_NAMESPACE,
        "Seconds",
        "sagemaker_async_age_of_oldest_request_seconds",
        "summary",
    ),
    MetricInfo(
        "HasBacklogWithoutCapacity",
        INVOCATION_NAMESPACE,
        "None",
        "sagemaker_async_has_backlog_without_capacity",
        "summary",
    ),
    # ... and per variant
    MetricInfo("InvocationsProcesssed", INVOCATION_NAMESPACE, "None", "sagemaker_async_processed", "summary"),
    MetricInfo("InvocationFailures", INVOCATION_NAMESPACE, "None", "sagemaker_async_failures", "summary"),
    MetricInfo("ExpiredRequests", INVOCATION_NAMESPACE, "None", "sagemaker_async_expired", "summary"),
    MetricInfo(
        "RequestDownloadFailures",
        INVOCATION_NAMESPACE,
        "None",
        "sagemaker_async_download_failures",
        "summary",
    ),
    MetricInfo(
        "ResponseUploadFailures", INVOCATION_NAMESPACE, "None", "sagemaker_async_upload_failures", "summary"
    ),
    MetricInfo(
        "NotificationFailures",
        INVOCATION_NAMESPACE,
        "None",
        "sagemaker_async_notification_failures",
        "summary",
    ),
    MetricInfo(
        "RequestDownloadLatency",
        INVOCATION_NAMESPACE,
        "Microseconds",
        "sagemaker_async_download_latency_microseconds",
        "summary",
    ),
    MetricInfo(
        "ResponseUploadLatency",
        INVOCATION_NAMESPACE,
        "Microseconds",
        "sagemaker_async_upload_latency_microseconds",
        "summary",
    ),
    MetricInfo(
        "TimeInBacklog", INVOCATION_NAMESPACE, "Milliseconds", "sagemaker_async_time_in_backlog_ms", "summary"
    ),
    MetricInfo(
        "TotalProcessingTime",
        INVOCATION_NAMESPACE,
        "Milliseconds",
        "sagemaker_async_total_processing_time_ms",
        "summary",
    ),
    # serverless endpoints (spec §7): each cold start's time; each request's concurrent executions
    # over MaxConcurrency (0-1), recorded when it is admitted
    MetricInfo(
        "ModelSetupTime",
        INVOCATION_NAMESPACE,
        "Microseconds",
        "sagemaker_model_setup_time_microseconds",
        "summary",
    ),
    MetricInfo(
        "ServerlessConcurrentExecutionsUtilization",
        INVOCATION_NAMESPACE,
        "None",
        "sagemaker_serverless_concurrent_executions_utilization",
        "summary",
    ),
    # with ProvisionedConcurrency, per admitted request: the executions the provisioned capacity
    # serves, over ProvisionedConcurrency, and whether the request was one of them (1) or spilled
    # over it (docs/serverless.md)
    *(
        MetricInfo(
            f"ServerlessProvisionedConcurrency{suffix}",
            INVOCATION_NAMESPACE,
            "None",
            f"sagemaker_serverless_provisioned_concurrency_{family}",
            "summary",
        )
        for suffix, family in (
            ("Executions", "executions"),
            ("Utilization", "utilization"),
            ("Invocations", "invocations"),
            ("SpilloverInvocations", "spillover_invocations"),
        )
    ),
    # inference components (dimension InferenceComponentName): per request, 1/copies in rotation;
    # each request refused for want of a copy; requests in flight over copies, sampled
    MetricInfo(
        "InvocationsPerCopy", INVOCATION_NAMESPACE, "None", "sagemaker_invocations_per_copy", "summary"
    ),
    MetricInfo(
        "NoCapacityInvocationFailures",
        INVOCATION_NAMESPACE,
        "None",
        "sagemaker_no_capacity_invocation_failures",
        "summary",
    ),
    MetricInfo(
        "ConcurrentRequestsPerCopy",
        INVOCATION_NAMESPACE,
        "None",
        "sagemaker_concurrent_requests_per_copy",
        "summary",
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
        "InvocationsPerCopy",
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


#: A multi-model endpoint's metrics: metric name -> the attribute that holds its statistic set on a
#: Period (series.py). Times are recorded per download, load, unload and waiting invocation;
#: ModelCacheHit 1 or 0 per invocation (Average: the hit ratio); LoadedModelCount one sample per
#: instance per period (Sum: over the instances).
MULTI_MODEL_METRICS: dict[str, str] = {
    "ModelLoadingWaitTime": "model_loading_wait",
    "ModelUnloadingTime": "model_unloading",
    "ModelDownloadingTime": "model_downloading",
    "ModelLoadingTime": "model_loading",
    "ModelCacheHit": "cache_hit",
    "LoadedModelCount": "loaded_models",
    # serverless endpoints' metrics, recorded the same way (one value per cold start or request)
    "ModelSetupTime": "model_setup",
    "ServerlessConcurrentExecutionsUtilization": "serverless_concurrency",
    "ServerlessProvisionedConcurrencyExecutions": "provisioned_executions",
    "ServerlessProvisionedConcurrencyUtilization": "provisioned_utilization",
    "ServerlessProvisionedConcurrencyInvocations": "provisioned_invocations",
    "ServerlessProvisionedConcurrencySpilloverInvocations": "spillover_invocations",
}

#: An asynchronous endpoint's queue metrics: per endpoint, dimension EndpointName only.
ASYNC_ENDPOINT_METRICS = frozenset(
    {
        "ApproximateBacklogSize",
        "ApproximateBacklogSizePerInstance",
        "ApproximateAgeOfOldestRequest",
        "HasBacklogWithoutCapacity",
    }
)
#: An asynchronous variant's own metrics (values recorded as they happen: 1 per event for the counts).
ASYNC_VARIANT_METRICS = frozenset(
    {
        "InvocationsProcesssed",
        "InvocationFailures",
        "ExpiredRequests",
        "RequestDownloadFailures",
        "ResponseUploadFailures",
        "NotificationFailures",
        "RequestDownloadLatency",
        "ResponseUploadLatency",
        "TimeInBacklog",
        "TotalProcessingTime",
    }
)
#: What SageMaker does not publish for asynchronous endpoints (spec §8).
NOT_FOR_ASYNC = frozenset({"Invocations", "InvocationsPerInstance", "OverheadLatency"})

#: The metrics of one container of a multi-container endpoint (dimension ContainerName added).
CONTAINER_METRICS = frozenset(
    {
        "Invocations",
        "Invocation4XXErrors",
        "Invocation5XXErrors",
        "ContainerLatency",
        "OverheadLatency",
        "CPUUtilization",
        "MemoryUtilization",
    }
)
#: What only inference components have (not published per variant).
COMPONENT_ONLY_METRICS = frozenset(
    {"InvocationsPerCopy", "NoCapacityInvocationFailures", "ConcurrentRequestsPerCopy"}
)
#: An inference component's metrics (dimension InferenceComponentName alone).
COMPONENT_METRICS = COMPONENT_ONLY_METRICS | {
    "Invocations",
    "Invocation4XXErrors",
    "Invocation5XXErrors",
    "InvocationModelErrors",
    "ModelLatency",
    "OverheadLatency",
}
#: ContainerLatency exists per container only (spec §4: the variant-level versions are the others).
VARIANT_METRICS = (
    frozenset(m.name for m in METRICS)
    - {"ContainerLatency"}
    - ASYNC_ENDPOINT_METRICS
    - COMPONENT_ONLY_METRICS
)

_VARIANT_DIMS = frozenset({"EndpointName", "VariantName"})
_CONTAINER_DIMS = frozenset({"EndpointName", "VariantName", "ContainerName"})
_ENDPOINT_DIMS = frozenset({"EndpointName"})
_COMPONENT_DIMS = frozenset({"InferenceComponentName"})
#: SeriesKey.variant of an endpoint's own series (the async queue metrics: EndpointName only)
ENDPOINT_LEVEL = ""
#: SeriesKey.variant of an inference component's series, whose `endpoint` is then the component's
#: name (no variant name can be "*")
COMPONENT_LEVEL = "*"


class SeriesKey(NamedTuple):
    """Where a metric's datapoints live: a variant's series, or one of its containers' (`container`
    is the ContainerHostname); with `variant` COMPONENT_LEVEL, an inference component's (`endpoint`
    is then the component's name)."""

    endpoint: str
    variant: str
    container: str | None = None

    def dimensions(self) -> tuple[tuple[str, str], ...]:
        if self.variant == ENDPOINT_LEVEL:
            return (("EndpointName", self.endpoint),)
        if self.variant == COMPONENT_LEVEL:
            return (("InferenceComponentName", self.endpoint),)
        dims = (("EndpointName", self.endpoint), ("VariantName", self.variant))
        return dims if self.container is None else (*dims, ("ContainerName", self.container))


def applies(name: str, key: SeriesKey) -> bool:
    """Whether smlocal publishes metric `name` for this series (a variant's or a container's)."""
    if key.variant == ENDPOINT_LEVEL:
        return name in ASYNC_ENDPOINT_METRICS
    if key.variant == COMPONENT_LEVEL:
        return name in COMPONENT_METRICS
    return name in (VARIANT_METRICS if key.container is None else CONTAINER_METRICS)


def locate(namespace: str, name: str, dimensions: Iterable[tuple[str, str]]) -> SeriesKey | None:
    """The series of a CloudWatch metric smlocal publishes, else None. Dimensions must be exactly
    EndpointName and VariantName (a variant's metric) or those and ContainerName (a container's), in
    any order, as CloudWatch matches them; EndpointName alone (an async endpoint's queue) or
    InferenceComponentName alone (a component's)."""
    info = METRICS_BY_NAME.get(name)
    dims = dict(dimensions)
    if info is None or info.namespace != namespace:
        return None
    if set(dims) == _VARIANT_DIMS:
        key = SeriesKey(dims["EndpointName"], dims["VariantName"])
    elif set(dims) == _CONTAINER_DIMS:
        key = SeriesKey(dims["EndpointName"], dims["VariantName"], dims["ContainerName"])
    elif set(dims) == _ENDPOINT_DIMS:
        key = SeriesKey(dims["EndpointName"], ENDPOINT_LEVEL)
    elif set(dims) == _COMPONENT_DIMS:
        key = SeriesKey(dims["InferenceComponentName"], COMPONENT_LEVEL)
    else:
        return None
    return key if applies(name, key) else None
