"""AWS request shapes -> domain values (CreateModel, CreateEndpointConfig, CreateEndpoint, UpdateEndpoint)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from emulator.errors import ValidationFailed
from emulator.model import messages, serverless
from emulator.model.components import ManagedInstanceScaling
from emulator.model.containers import check_containers
from emulator.model.resources import (
    AdditionalModelData,
    AsyncInference,
    ContainerDefinition,
    ModelDataSource,
    ProductionVariant,
    RoutingStrategy,
    ServerlessConfig,
)
from emulator.model.s3_urls import s3_location
from emulator.wire.serialize.common import refuse_members, tags_input, unsupported
from emulator.wire.serialize_deployment import deployment_config_input


def s3_model_data_source(s3: Mapping[str, Any]) -> ModelDataSource:
    """An S3ModelDataSource (botocore has checked its members' shapes)."""
    access = s3.get("ModelAccessConfig")
    data = ModelDataSource(
        uri=s3["S3Uri"],
        compression=s3["CompressionType"],
        data_type=s3["S3DataType"],
        accept_eula=None if access is None else bool(access.get("AcceptEula")),
    )
    if data.data_type == "S3Prefix" and data.compression == "Gzip":
        raise ValidationFailed(messages.prefix_needs_uncompressed())
    if data.data_type == "S3Prefix" and not data.uri.endswith("/"):
        raise ValidationFailed(messages.prefix_without_slash(data.uri))
    return data


def additional_model_data(raw: Any) -> tuple[AdditionalModelData, ...]:
    channels = tuple(
        AdditionalModelData(c["ChannelName"], s3_model_data_source(c["S3DataSource"])) for c in raw or ()
    )
    seen: set[str] = set()
    for c in channels:
        if c.channel_name in seen:
            raise ValidationFailed(messages.duplicate_channel(c.channel_name))
        seen.add(c.channel_name)
    return channels


def container_definition(c: Mapping[str, Any]) -> ContainerDefinition:
    if "Image" not in c:
        raise ValidationFailed("A container definition needs an Image.")  # [U]: SageMaker's text is unknown
    data: ModelDataSource | None = None
    if c.get("ModelDataUrl"):
        data = ModelDataSource(uri=c["ModelDataUrl"])
        if c.get("ModelDataSource"):
            raise ValidationFailed(messages.both_model_data_forms())
    elif c.get("ModelDataSource"):
        s3 = c["ModelDataSource"].get("S3DataSource")
        if not s3:
            raise unsupported("ModelDataSource without S3DataSource")
        data = s3_model_data_source(s3)
    channels = additional_model_data(c.get("AdditionalModelDataSources"))
    mode = c.get("Mode", "SingleModel")
    if channels and mode == "MultiModel":
        raise ValidationFailed(messages.channels_with_multi_model())
    return ContainerDefinition(
        image=c["Image"],
        environment=dict(c.get("Environment") or {}),
        model_data=data,
        hostname=c.get("ContainerHostname"),
        mode=mode,
        model_cache_setting=(c.get("MultiModelConfig") or {}).get("ModelCacheSetting", "Enabled"),
        repository_access_mode=(c.get("ImageConfig") or {}).get("RepositoryAccessMode"),
        additional_model_data=channels,
    )


def create_model_input(params: Mapping[str, Any]) -> dict[str, Any]:
    raw = params.get("Containers") or []
    primary = params.get("PrimaryContainer")
    if primary and raw:
        raise ValidationFailed(messages.primary_and_containers())
    mode = (params.get("InferenceExecutionConfig") or {}).get("Mode")
    containers: tuple[ContainerDefinition, ...] = ()
    if primary:
        first = container_definition(primary)
    else:
        containers = tuple(container_definition(c) for c in raw)
        if len(containers) > 1 and any(c.multi_model for c in containers):
            raise unsupported("A multi-model container in a model of several containers")
        check_containers(containers, mode)
        first = containers[0]
    return {
        "name": params["ModelName"],
        "container": first,
        "containers": containers,
        "inference_mode": mode if containers else None,
        "execution_role_arn": params.get("ExecutionRoleArn"),
        "enable_network_isolation": bool(params.get("EnableNetworkIsolation", False)),
        "tags": tags_input(params),
    }


def managed_instance_scaling(m: Mapping[str, Any] | None) -> ManagedInstanceScaling | None:
    """A variant's ManagedInstanceScaling (its instances follow its inference components' copies).
    Status absent counts as DISABLED [U]; of ScaleInPolicy only Strategy is implemented."""
    if m is None:
        return None
    policy = m.get("ScaleInPolicy")
    if policy is not None:
        refuse_members("ProductionVariantManagedInstanceScalingScaleInPolicy", policy)
    return ManagedInstanceScaling(
        enabled=m.get("Status") == "ENABLED",
        min_instances=m.get("MinInstanceCount"),
        max_instances=m.get("MaxInstanceCount"),
        scale_in_strategy=None if policy is None else policy["Strategy"],
    )


def production_variant(v: Mapping[str, Any]) -> ProductionVariant:
    """A ProductionVariant. Without ModelName it provides instances for inference components
    (model_name None; model/component_rules.py checks such a config)."""
    refuse_members("ProductionVariant", v)
    routing = (v.get("RoutingConfig") or {}).get(
        "RoutingStrategy", RoutingStrategy.LEAST_OUTSTANDING_REQUESTS
    )
    serverless_config = serverless_input(v)
    count = int(v.get("InitialInstanceCount", 1))
    if serverless_config is not None:
        count = serverless.warm_containers(serverless_config)
    return ProductionVariant(
        variant_name=v["VariantName"],
        model_name=v.get("ModelName"),
        initial_instance_count=count,
        instance_type=v.get("InstanceType"),
        initial_variant_weight=float(v.get("InitialVariantWeight", 1.0)),
        startup_health_check_timeout_s=v.get("ContainerStartupHealthCheckTimeoutInSeconds"),
        model_data_download_timeout_s=v.get("ModelDataDownloadTimeoutInSeconds"),
        routing_strategy=RoutingStrategy(routing),
        volume_size_gb=v.get("VolumeSizeInGB"),
        serverless=serverless_config,
        managed_instance_scaling=managed_instance_scaling(v.get("ManagedInstanceScaling")),
    )


def serverless_input(v: Mapping[str, Any]) -> ServerlessConfig | None:
    """A variant's ServerlessConfig, checked (model/serverless.py); None for an instance variant."""
    c = v.get("ServerlessConfig")
    if c is None:
        return None
    serverless.check_variant_fields(v["VariantName"], v.get("InstanceType"), "InitialInstanceCount" in v)
    config = ServerlessConfig(
        memory_size_mb=int(c["MemorySizeInMB"]),
        max_concurrency=int(c["MaxConcurrency"]),
        provisioned_concurrency=c.get("ProvisionedConcurrency"),
    )
    serverless.check_config(v["VariantName"], config)
    return config


def create_endpoint_config_input(params: Mapping[str, Any]) -> dict[str, Any]:
    refuse_members("CreateEndpointConfigInput", params)
    return {
        "name": params["EndpointConfigName"],
        "variants": tuple(production_variant(v) for v in params["ProductionVariants"]),
        "kms_key_id": params.get("KmsKeyId"),
        "tags": tags_input(params),
        "async_inference": async_inference_input(params.get("AsyncInferenceConfig")),
        "execution_role_arn": params.get("ExecutionRoleArn"),
    }


def async_inference_input(c: Mapping[str, Any] | None) -> AsyncInference | None:
    if c is None:
        return None
    output = c.get("OutputConfig") or {}
    notification = output.get("NotificationConfig") or {}
    if "S3OutputPath" not in output:  # [U] text; the model leaves it optional
        raise ValidationFailed("AsyncInferenceConfig.OutputConfig.S3OutputPath is required.")
    for member in ("S3OutputPath", "S3FailurePath"):
        path = output.get(member)
        if path is not None and s3_location(path.rstrip("/") + "/x") is None:
            raise ValidationFailed(messages.async_output_not_s3(member, path))
    return AsyncInference(
        s3_output_path=output["S3OutputPath"],
        s3_failure_path=output.get("S3FailurePath"),
        max_concurrent_per_instance=(c.get("ClientConfig") or {}).get("MaxConcurrentInvocationsPerInstance"),
        kms_key_id=output.get("KmsKeyId"),
        success_topic=notification.get("SuccessTopic"),
        error_topic=notification.get("ErrorTopic"),
        include_response_in=tuple(notification.get("IncludeInferenceResponseIn") or ()),
    )


def create_endpoint_input(params: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "name": params["EndpointName"],
        "config_name": params["EndpointConfigName"],
        "deployment": deployment_config_input(params.get("DeploymentConfig")),
        "tags": tags_input(params),
    }


def update_endpoint_weights_and_capacities_input(params: Mapping[str, Any]) -> dict[str, Any]:
    desired: list[tuple[str, float | None, int | None]] = []
    serverless_updates: list[tuple[str, int | None, int | None]] = []
    for d in params["DesiredWeightsAndCapacities"]:
        if "ServerlessUpdateConfig" in d:
            update = d["ServerlessUpdateConfig"]
            serverless_updates.append(
                (d["VariantName"], update.get("MaxConcurrency"), update.get("ProvisionedConcurrency"))
            )
        weight = d.get("DesiredWeight")
        count = d.get("DesiredInstanceCount")
        desired.append(
            (
                d["VariantName"],
                None if weight is None else float(weight),
                None if count is None else int(count),
            )
        )
    out: dict[str, Any] = {"name": params["EndpointName"], "desired": tuple(desired)}
    if serverless_updates:
        out["serverless"] = tuple(serverless_updates)
    return out


def update_endpoint_input(params: Mapping[str, Any]) -> dict[str, Any]:
    excluded = frozenset(
        p["VariantPropertyType"] for p in params.get("ExcludeRetainedVariantProperties") or []
    )
    if "DataCaptureConfig" in excluded:
        raise unsupported("UpdateEndpoint ExcludeRetainedVariantProperties DataCaptureConfig")
    return {
        "name": params["EndpointName"],
        "config_name": params["EndpointConfigName"],
        "retain_all": bool(params.get("RetainAllVariantProperties", False)),
        "exclude_retained": excluded,
        "deployment": deployment_config_input(params.get("DeploymentConfig")),
        "retain_deployment": bool(params.get("RetainDeploymentConfig", False)),
    }
