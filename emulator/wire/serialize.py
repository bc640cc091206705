"""AWS shapes <-> domain values. The only module where SageMaker's PascalCase names appear."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from emulator.errors import ValidationFailed
from emulator.model import messages, serverless
from emulator.model.containers import check_containers
from emulator.model.resources import (
    AsyncInference,
    ContainerDefinition,
    Endpoint,
    EndpointConfig,
    Model,
    ModelDataSource,
    ProductionVariant,
    RoutingStrategy,
    ServerlessConfig,
    VariantSummary,
)
from emulator.wire.serialize_deployment import deployment_config_input, deployment_config_output

JSON = dict[str, Any]

LOCAL_URI_PREFIXES = ("file://", "/", "./", "../")


def is_local_uri(uri: str) -> bool:
    """smlocal's extension: model data may be a local path or file:// URL as well as s3://."""
    return uri.startswith(LOCAL_URI_PREFIXES) or "://" not in uri


def _ts(value: datetime) -> float:
    return value.timestamp()


def _tags(params: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((t["Key"], t.get("Value", "")) for t in params.get("Tags") or ())


def _unsupported(feature: str) -> ValidationFailed:
    return ValidationFailed(f"{feature} is not supported by smlocal yet. See docs/api-coverage.md.")


# ---------------------------------------------------------------------------------------- input


def container_definition(c: Mapping[str, Any]) -> ContainerDefinition:
    if "Image" not in c:
        raise ValidationFailed("A container definition needs an Image.")  # [U]: SageMaker's text is unknown
    data: ModelDataSource | None = None
    if c.get("ModelDataUrl"):
        data = ModelDataSource(uri=c["ModelDataUrl"])
        if c.get("ModelDataSource"):
            raise ValidationFailed("Specify either ModelDataUrl or ModelDataSource, not both.")
    elif c.get("ModelDataSource"):
        s3 = c["ModelDataSource"].get("S3DataSource")
        if not s3:
            raise _unsupported("ModelDataSource without S3DataSource")
        data = ModelDataSource(uri=s3["S3Uri"], compression=s3["CompressionType"], data_type=s3["S3DataType"])
        if data.data_type == "S3Prefix" and data.compression == "Gzip":
            raise ValidationFailed("S3DataType S3Prefix requires CompressionType None.")
        if data.data_type == "S3Prefix" and not data.uri.endswith("/"):
            raise ValidationFailed(f"S3Uri {data.uri} of an S3Prefix data source must end with '/'.")
    return ContainerDefinition(
        image=c["Image"],
        environment=dict(c.get("Environment") or {}),
        model_data=data,
        hostname=c.get("ContainerHostname"),
        mode=c.get("Mode", "SingleModel"),
        model_cache_setting=(c.get("MultiModelConfig") or {}).get("ModelCacheSetting", "Enabled"),
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
            raise _unsupported("A multi-model container in a model of several containers")
        check_containers(containers, mode)
        first = containers[0]
    return {
        "name": params["ModelName"],
        "container": first,
        "containers": containers,
        "inference_mode": mode if containers else None,
        "execution_role_arn": params.get("ExecutionRoleArn"),
        "enable_network_isolation": bool(params.get("EnableNetworkIsolation", False)),
        "tags": _tags(params),
    }


def production_variant(v: Mapping[str, Any]) -> ProductionVariant:
    for feature in (
        "ManagedInstanceScaling",
        "InstancePools",
        "CapacityReservationConfig",
    ):
        if feature in v:
            raise _unsupported(f"ProductionVariant {feature}")
    if "ModelName" not in v:
        raise _unsupported("A production variant without ModelName (inference components)")
    routing = (v.get("RoutingConfig") or {}).get(
        "RoutingStrategy", RoutingStrategy.LEAST_OUTSTANDING_REQUESTS
    )
    serverless_config = serverless_input(v)
    count = int(v.get("InitialInstanceCount", 1))
    if serverless_config is not None:
        count = serverless.warm_containers(serverless_config)
    return ProductionVariant(
        variant_name=v["VariantName"],
        model_name=v["ModelName"],
        initial_instance_count=count,
        instance_type=v.get("InstanceType"),
        initial_variant_weight=float(v.get("InitialVariantWeight", 1.0)),
        startup_health_check_timeout_s=v.get("ContainerStartupHealthCheckTimeoutInSeconds"),
        model_data_download_timeout_s=v.get("ModelDataDownloadTimeoutInSeconds"),
        routing_strategy=RoutingStrategy(routing),
        volume_size_gb=v.get("VolumeSizeInGB"),
        serverless=serverless_config,
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


def _serverless(c: ServerlessConfig) -> JSON:
    out: JSON = {"MemorySizeInMB": c.memory_size_mb, "MaxConcurrency": c.max_concurrency}
    if c.provisioned_concurrency is not None:
        out["ProvisionedConcurrency"] = c.provisioned_concurrency
    return out


def create_endpoint_config_input(params: Mapping[str, Any]) -> dict[str, Any]:
    for feature in (
        "ShadowProductionVariants",
        "ExplainerConfig",
        "DataCaptureConfig",
    ):
        if feature in params:
            raise _unsupported(feature)
    return {
        "name": params["EndpointConfigName"],
        "variants": tuple(production_variant(v) for v in params["ProductionVariants"]),
        "kms_key_id": params.get("KmsKeyId"),
        "tags": _tags(params),
        "async_inference": async_inference_input(params.get("AsyncInferenceConfig")),
    }


def async_inference_input(c: Mapping[str, Any] | None) -> AsyncInference | None:
    if c is None:
        return None
    output = c.get("OutputConfig") or {}
    notification = output.get("NotificationConfig") or {}
    if "S3OutputPath" not in output:  # [U] text; the model leaves it optional
        raise ValidationFailed("AsyncInferenceConfig.OutputConfig.S3OutputPath is required.")
    return AsyncInference(
        s3_output_path=output["S3OutputPath"],
        s3_failure_path=output.get("S3FailurePath"),
        max_concurrent_per_instance=(c.get("ClientConfig") or {}).get("MaxConcurrentInvocationsPerInstance"),
        kms_key_id=output.get("KmsKeyId"),
        success_topic=notification.get("SuccessTopic"),
        error_topic=notification.get("ErrorTopic"),
        include_response_in=tuple(notification.get("IncludeInferenceResponseIn") or ()),
    )


def _async_inference(a: AsyncInference) -> JSON:
    output: JSON = {"S3OutputPath": a.s3_output_path}
    if a.s3_failure_path:
        output["S3FailurePath"] = a.s3_failure_path
    if a.kms_key_id:
        output["KmsKeyId"] = a.kms_key_id
    notification: JSON = {}
    if a.success_topic:
        notification["SuccessTopic"] = a.success_topic
    if a.error_topic:
        notification["ErrorTopic"] = a.error_topic
    if a.include_response_in:
        notification["IncludeInferenceResponseIn"] = list(a.include_response_in)
    if notification:
        output["NotificationConfig"] = notification
    out: JSON = {"OutputConfig": output}
    if a.max_concurrent_per_instance is not None:
        out["ClientConfig"] = {"MaxConcurrentInvocationsPerInstance": a.max_concurrent_per_instance}
    return out


def create_endpoint_input(params: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "name": params["EndpointName"],
        "config_name": params["EndpointConfigName"],
        "deployment": deployment_config_input(params.get("DeploymentConfig")),
        "tags": _tags(params),
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
        raise _unsupported("UpdateEndpoint ExcludeRetainedVariantProperties DataCaptureConfig")
    return {
        "name": params["EndpointName"],
        "config_name": params["EndpointConfigName"],
        "retain_all": bool(params.get("RetainAllVariantProperties", False)),
        "exclude_retained": excluded,
        "deployment": deployment_config_input(params.get("DeploymentConfig")),
        "retain_deployment": bool(params.get("RetainDeploymentConfig", False)),
    }


# ---------------------------------------------------------------------------------------- output


def _container(c: ContainerDefinition) -> JSON:
    out: JSON = {"Image": c.image, "Mode": c.mode}
    if c.multi_model:
        out["MultiModelConfig"] = {"ModelCacheSetting": c.model_cache_setting}
    if c.environment:
        out["Environment"] = dict(c.environment)
    if c.hostname:
        out["ContainerHostname"] = c.hostname
    if c.model_data is not None:
        if c.model_data.compression == "Gzip" and c.model_data.data_type == "S3Object":
            out["ModelDataUrl"] = c.model_data.uri
        else:
            out["ModelDataSource"] = {
                "S3DataSource": {
                    "S3Uri": c.model_data.uri,
                    "S3DataType": c.model_data.data_type,
                    "CompressionType": c.model_data.compression,
                }
            }
    return out


def describe_model(m: Model) -> JSON:
    out: JSON = {
        "ModelName": m.name,
        "ModelArn": m.arn,
        "CreationTime": _ts(m.creation_time),
        "EnableNetworkIsolation": m.enable_network_isolation,
    }
    if m.containers:
        out["Containers"] = [_container(c) for c in m.containers]
        if m.inference_mode is not None:
            out["InferenceExecutionConfig"] = {"Mode": m.inference_mode}
    else:
        out["PrimaryContainer"] = _container(m.primary_container)
    if m.execution_role_arn:
        out["ExecutionRoleArn"] = m.execution_role_arn
    return out


def _variant(v: ProductionVariant) -> JSON:
    out: JSON = {
        "VariantName": v.variant_name,
        "ModelName": v.model_name,
        "InitialInstanceCount": v.initial_instance_count,
        "InitialVariantWeight": v.initial_variant_weight,
        "RoutingConfig": {"RoutingStrategy": v.routing_strategy.value},
    }
    if v.serverless is not None:  # no instances: ServerlessConfig instead of InitialInstanceCount
        del out["InitialInstanceCount"]
        out["ServerlessConfig"] = _serverless(v.serverless)
    if v.instance_type:
        out["InstanceType"] = v.instance_type
    if v.startup_health_check_timeout_s is not None:
        out["ContainerStartupHealthCheckTimeoutInSeconds"] = v.startup_health_check_timeout_s
    if v.model_data_download_timeout_s is not None:
        out["ModelDataDownloadTimeoutInSeconds"] = v.model_data_download_timeout_s
    if v.volume_size_gb is not None:
        out["VolumeSizeInGB"] = v.volume_size_gb
    return out


def describe_endpoint_config(c: EndpointConfig) -> JSON:
    out: JSON = {
        "EndpointConfigName": c.name,
        "EndpointConfigArn": c.arn,
        "ProductionVariants": [_variant(v) for v in c.production_variants],
        "CreationTime": _ts(c.creation_time),
    }
    if c.kms_key_id:
        out["KmsKeyId"] = c.kms_key_id
    if c.async_inference is not None:
        out["AsyncInferenceConfig"] = _async_inference(c.async_inference)
    return out


def describe_endpoint(e: Endpoint) -> JSON:
    out: JSON = {
        "EndpointName": e.name,
        "EndpointArn": e.arn,
        "EndpointConfigName": e.endpoint_config_name,
        "EndpointStatus": e.status.value,
        "CreationTime": _ts(e.creation_time),
        "LastModifiedTime": _ts(e.last_modified_time),
    }
    if e.failure_reason:
        out["FailureReason"] = e.failure_reason
    if e.production_variants:
        out["ProductionVariants"] = [_variant_summary(v) for v in e.production_variants]
    if e.last_deployment_config is not None:
        out["LastDeploymentConfig"] = deployment_config_output(e.last_deployment_config)
    pending = e.pending_deployment
    if pending is not None:
        out["PendingDeploymentSummary"] = {
            "EndpointConfigName": pending.endpoint_config_name,
            "StartTime": _ts(pending.start_time),
            "ProductionVariants": [
                {
                    "VariantName": v.variant_name,
                    "DesiredWeight": v.desired_weight,
                    "DesiredInstanceCount": v.desired_instance_count,
                    **({"InstanceType": v.instance_type} if v.instance_type else {}),
                    **_variant_statuses(v),
                }
                for v in pending.production_variants
            ],
        }
    return out


def _deployed_images(v: VariantSummary) -> list[JSON]:
    return [
        {
            "SpecifiedImage": d.specified_image,
            "ResolvedImage": d.resolved_image,
            "ResolutionTime": _ts(d.resolution_time),
        }
        for d in v.deployed_images
    ]


def _variant_statuses(v: VariantSummary) -> JSON:
    if not v.statuses:
        return {}
    return {
        "VariantStatus": [
            {"Status": s.status, "StatusMessage": s.message, "StartTime": _ts(s.start_time)}
            for s in v.statuses
        ]
    }


def _variant_summary(v: VariantSummary) -> JSON:
    if v.serverless is not None:  # [U] no instance counts: its containers come and go on demand
        return {
            "VariantName": v.variant_name,
            "DeployedImages": _deployed_images(v),
            "CurrentWeight": v.current_weight,
            "DesiredWeight": v.desired_weight,
            "CurrentServerlessConfig": _serverless(v.serverless),
            "DesiredServerlessConfig": _serverless(v.serverless),
            **_variant_statuses(v),
        }
    return {
        "VariantName": v.variant_name,
        "DeployedImages": [
            {
                "SpecifiedImage": d.specified_image,
                "ResolvedImage": d.resolved_image,
                "ResolutionTime": _ts(d.resolution_time),
            }
            for d in v.deployed_images
        ],
        "CurrentWeight": v.current_weight,
        "DesiredWeight": v.desired_weight,
        "CurrentInstanceCount": v.current_instance_count,
        "DesiredInstanceCount": v.desired_instance_count,
        **_variant_statuses(v),
    }


def model_summary(m: Model) -> JSON:
    return {"ModelName": m.name, "ModelArn": m.arn, "CreationTime": _ts(m.creation_time)}


def endpoint_config_summary(c: EndpointConfig) -> JSON:
    return {"EndpointConfigName": c.name, "EndpointConfigArn": c.arn, "CreationTime": _ts(c.creation_time)}


def endpoint_summary(e: Endpoint) -> JSON:
    return {
        "EndpointName": e.name,
        "EndpointArn": e.arn,
        "CreationTime": _ts(e.creation_time),
        "LastModifiedTime": _ts(e.last_modified_time),
        "EndpointStatus": e.status.value,
    }
