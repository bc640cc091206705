"""Domain values -> AWS response shapes (Describe*, List* summaries)."""

from __future__ import annotations

from emulator.model.components import DeployedComponentImage, ManagedInstanceScaling
from emulator.model.resources import (
    AsyncInference,
    ContainerDefinition,
    DeployedImage,
    Endpoint,
    EndpointConfig,
    Model,
    ModelDataSource,
    ProductionVariant,
    ServerlessConfig,
    VariantSummary,
)
from emulator.wire.serialize.common import JSON, epoch_seconds
from emulator.wire.serialize_deployment import deployment_config_output


def _serverless(c: ServerlessConfig) -> JSON:
    out: JSON = {"MemorySizeInMB": c.memory_size_mb, "MaxConcurrency": c.max_concurrency}
    if c.provisioned_concurrency is not None:
        out["ProvisionedConcurrency"] = c.provisioned_concurrency
    return out


def managed_instance_scaling_output(m: ManagedInstanceScaling) -> JSON:
    """A variant's ManagedInstanceScaling as DescribeEndpointConfig and DescribeEndpoint show it."""
    out: JSON = {"Status": "ENABLED" if m.enabled else "DISABLED"}
    if m.min_instances is not None:
        out["MinInstanceCount"] = m.min_instances
    if m.max_instances is not None:
        out["MaxInstanceCount"] = m.max_instances
    if m.scale_in_strategy is not None:
        out["ScaleInPolicy"] = {"Strategy": m.scale_in_strategy}
    return out


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


def _container(c: ContainerDefinition) -> JSON:
    out: JSON = {"Image": c.image, "Mode": c.mode}
    if c.multi_model:
        out["MultiModelConfig"] = {"ModelCacheSetting": c.model_cache_setting}
    if c.environment:
        out["Environment"] = dict(c.environment)
    if c.hostname:
        out["ContainerHostname"] = c.hostname
    if c.repository_access_mode is not None:
        out["ImageConfig"] = {"RepositoryAccessMode": c.repository_access_mode}
    if c.model_data is not None:
        if (
            c.model_data.compression == "Gzip"
            and c.model_data.data_type == "S3Object"
            and c.model_data.accept_eula is None
        ):
            out["ModelDataUrl"] = c.model_data.uri
        else:
            out["ModelDataSource"] = {"S3DataSource": _s3_data_source(c.model_data)}
    if c.additional_model_data:
        out["AdditionalModelDataSources"] = [
            {"ChannelName": a.channel_name, "S3DataSource": _s3_data_source(a.source)}
            for a in c.additional_model_data
        ]
    return out


def _s3_data_source(d: ModelDataSource) -> JSON:
    out: JSON = {"S3Uri": d.uri, "S3DataType": d.data_type, "CompressionType": d.compression}
    if d.accept_eula is not None:
        out["ModelAccessConfig"] = {"AcceptEula": d.accept_eula}
    return out


def describe_model(m: Model) -> JSON:
    out: JSON = {
        "ModelName": m.name,
        "ModelArn": m.arn,
        "CreationTime": epoch_seconds(m.creation_time),
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


def variant_description(v: ProductionVariant) -> JSON:
    out: JSON = {"VariantName": v.variant_name}
    if v.model_name is not None:  # None: a variant for inference components
        out["ModelName"] = v.model_name
    out["InitialInstanceCount"] = v.initial_instance_count
    out["InitialVariantWeight"] = v.initial_variant_weight
    out["RoutingConfig"] = {"RoutingStrategy": v.routing_strategy.value}
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
    if v.managed_instance_scaling is not None:
        out["ManagedInstanceScaling"] = managed_instance_scaling_output(v.managed_instance_scaling)
    return out


def describe_endpoint_config(c: EndpointConfig) -> JSON:
    out: JSON = {
        "EndpointConfigName": c.name,
        "EndpointConfigArn": c.arn,
        "ProductionVariants": [variant_description(v) for v in c.production_variants],
        "CreationTime": epoch_seconds(c.creation_time),
    }
    if c.kms_key_id:
        out["KmsKeyId"] = c.kms_key_id
    if c.async_inference is not None:
        out["AsyncInferenceConfig"] = _async_inference(c.async_inference)
    if c.execution_role_arn:
        out["ExecutionRoleArn"] = c.execution_role_arn
    return out


def describe_endpoint(e: Endpoint) -> JSON:
    out: JSON = {
        "EndpointName": e.name,
        "EndpointArn": e.arn,
        "EndpointConfigName": e.endpoint_config_name,
        "EndpointStatus": e.status.value,
        "CreationTime": epoch_seconds(e.creation_time),
        "LastModifiedTime": epoch_seconds(e.last_modified_time),
    }
    if e.failure_reason:
        out["FailureReason"] = e.failure_reason
    if e.production_variants:
        out["ProductionVariants"] = [_variant_summary(v) for v in e.production_variants]
    if e.last_deployment_config is not None:
        out["LastDeploymentConfig"] = deployment_config_output(e.last_deployment_config)
    if e.async_inference is not None:
        out["AsyncInferenceConfig"] = _async_inference(e.async_inference)
    pending = e.pending_deployment
    if pending is not None:
        out["PendingDeploymentSummary"] = {
            "EndpointConfigName": pending.endpoint_config_name,
            "StartTime": epoch_seconds(pending.start_time),
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


def deployed_image(d: DeployedImage | DeployedComponentImage) -> JSON:
    """A DeployedImage shape (an endpoint variant's, or an inference component's container's)."""
    return {
        "SpecifiedImage": d.specified_image,
        "ResolvedImage": d.resolved_image,
        "ResolutionTime": epoch_seconds(d.resolution_time),
    }


def _deployed_images(v: VariantSummary) -> list[JSON]:
    return [deployed_image(d) for d in v.deployed_images]


def _variant_statuses(v: VariantSummary) -> JSON:
    if not v.statuses:
        return {}
    return {
        "VariantStatus": [
            {"Status": s.status, "StatusMessage": s.message, "StartTime": epoch_seconds(s.start_time)}
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
    out: JSON = {
        "VariantName": v.variant_name,
        "DeployedImages": _deployed_images(v),
        "CurrentWeight": v.current_weight,
        "DesiredWeight": v.desired_weight,
        "CurrentInstanceCount": v.current_instance_count,
        "DesiredInstanceCount": v.desired_instance_count,
        **_variant_statuses(v),
    }
    if not v.deployed_images:  # [U] a variant for inference components runs no image of its own
        del out["DeployedImages"]
    if v.managed_instance_scaling is not None:
        out["ManagedInstanceScaling"] = managed_instance_scaling_output(v.managed_instance_scaling)
    return out


def model_summary(m: Model) -> JSON:
    return {"ModelName": m.name, "ModelArn": m.arn, "CreationTime": epoch_seconds(m.creation_time)}


def endpoint_config_summary(c: EndpointConfig) -> JSON:
    return {
        "EndpointConfigName": c.name,
        "EndpointConfigArn": c.arn,
        "CreationTime": epoch_seconds(c.creation_time),
    }


def endpoint_summary(e: Endpoint) -> JSON:
    return {
        "EndpointName": e.name,
        "EndpointArn": e.arn,
        "CreationTime": epoch_seconds(e.creation_time),
        "LastModifiedTime": epoch_seconds(e.last_modified_time),
        "EndpointStatus": e.status.value,
    }
