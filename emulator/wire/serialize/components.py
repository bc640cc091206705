"""Inference components: AWS request shapes -> `model.components` values, and those values ->
DescribeInferenceComponent / ListInferenceComponents shapes.

What smlocal does not implement of a specification (Specifications, DataCacheConfig,
ContainerMetricsConfig, AcceleratorPartitionType, AvailabilityZoneBalance) is in REFUSED_MEMBERS
(wire/unsupported.py): refused by the wire before a handler runs, and again here for direct callers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import botocore.model

from emulator.errors import ValidationFailed
from emulator.model import messages
from emulator.model.components import (
    CapacitySize,
    ComponentContainer,
    ComponentDeploymentConfig,
    ComponentRuntime,
    ComponentSpec,
    ComputeRequirements,
    InferenceComponent,
    PlacementStrategy,
    RollingUpdatePolicy,
)
from emulator.wire.serialize.common import JSON, epoch_seconds, refuse_members, tags_input
from emulator.wire.serialize.responses import deployed_image
from emulator.wire.serialize_deployment import rollback_alarms
from emulator.wire.service_models import SAGEMAKER, operation_model

__all__ = [
    "component_deployment_input",
    "component_spec",
    "create_inference_component_input",
    "describe_inference_component",
    "inference_component_summary",
    "update_inference_component_input",
    "update_inference_component_runtime_config_input",
]


# ---------------------------------------------------------------------------------------- requests


def _container(c: Mapping[str, Any] | None) -> ComponentContainer | None:
    if c is None:
        return None
    refuse_members("InferenceComponentContainerSpecification", c)
    return ComponentContainer(
        image=c.get("Image"),
        artifact_url=c.get("ArtifactUrl"),
        environment=dict(c.get("Environment") or {}),
    )


def _compute(c: Mapping[str, Any] | None) -> ComputeRequirements | None:
    if c is None:
        return None
    refuse_members("InferenceComponentComputeResourceRequirements", c)
    cpus = c.get("NumberOfCpuCoresRequired")
    accelerators = c.get("NumberOfAcceleratorDevicesRequired")
    return ComputeRequirements(
        min_memory_mb=int(c["MinMemoryRequiredInMb"]),
        cpus=None if cpus is None else float(cpus),
        accelerators=None if accelerators is None else float(accelerators),
        max_memory_mb=c.get("MaxMemoryRequiredInMb"),
    )


def _placement(scheduling: Mapping[str, Any] | None) -> PlacementStrategy:
    """SchedulingConfig.PlacementStrategy; SPREAD when there is none (SageMaker's default)."""
    if scheduling is None:
        return PlacementStrategy.SPREAD
    refuse_members("InferenceComponentSchedulingConfig", scheduling)
    return PlacementStrategy(scheduling["PlacementStrategy"])


def component_spec(p: Mapping[str, Any]) -> ComponentSpec:
    """An InferenceComponentSpecification: what a copy runs (a model, or an image and its artifact),
    what it reserves, how long it may take to start; or, with BaseInferenceComponentName, an adapter
    its base's copies serve."""
    refuse_members("InferenceComponentSpecification", p)
    container = _container(p.get("Container"))
    model_name = p.get("ModelName")
    base = p.get("BaseInferenceComponentName")
    if model_name is not None and container is not None:
        raise ValidationFailed(messages.component_model_and_container())
    if base is None and model_name is None and (container is None or container.image is None):
        raise ValidationFailed(messages.component_needs_model())
    startup = p.get("StartupParameters") or {}
    return ComponentSpec(
        model_name=model_name,
        container=container,
        compute=_compute(p.get("ComputeResourceRequirements")),
        model_data_download_timeout_s=startup.get("ModelDataDownloadTimeoutInSeconds"),
        startup_health_check_timeout_s=startup.get("ContainerStartupHealthCheckTimeoutInSeconds"),
        base_component_name=base,
        placement=_placement(p.get("SchedulingConfig")),
        instance_type=p.get("InstanceType"),
    )


def _copies_at_create(runtime: Mapping[str, Any] | None, spec: ComponentSpec) -> int:
    """RuntimeConfig.CopyCount, at least 1 (the model allows 0); an adapter without RuntimeConfig
    has none of its own (0): its base's copies serve it."""
    if runtime is None and spec.adapter:
        return 0
    copies = None if runtime is None else runtime.get("CopyCount")
    if copies is None or int(copies) < 1:
        raise ValidationFailed(messages.component_copy_count_at_create())
    return int(copies)


def create_inference_component_input(params: Mapping[str, Any]) -> dict[str, Any]:
    """CreateInferenceComponent's request as HostingService.create_inference_component's arguments.
    An adapter may omit VariantName: variant_name is then "" (it goes where its base is)."""
    refuse_members("CreateInferenceComponentInput", params)
    raw = params.get("Specification")
    if raw is None:
        raise ValidationFailed(messages.component_needs_specification())
    spec = component_spec(raw)
    variant = params.get("VariantName")
    if variant is None and not spec.adapter:
        raise ValidationFailed(messages.component_needs_variant())
    return {
        "name": params["InferenceComponentName"],
        "endpoint_name": params["EndpointName"],
        "variant_name": variant or "",
        "spec": spec,
        "copies": _copies_at_create(params.get("RuntimeConfig"), spec),
        "tags": tags_input(params),
    }


def _capacity_size(p: Mapping[str, Any]) -> CapacitySize:
    return CapacitySize(p["Type"], int(p["Value"]))


def component_deployment_input(p: Mapping[str, Any] | None) -> ComponentDeploymentConfig | None:
    """UpdateInferenceComponent's DeploymentConfig (a rolling update of the copies, with rollback
    alarms); None when the request has none."""
    if p is None:
        return None
    ru = p["RollingUpdatePolicy"]
    rollback = ru.get("RollbackMaximumBatchSize")
    return ComponentDeploymentConfig(
        rolling_update=RollingUpdatePolicy(
            maximum_batch_size=_capacity_size(ru["MaximumBatchSize"]),
            wait_interval_s=int(ru["WaitIntervalInSeconds"]),
            maximum_execution_timeout_s=ru.get("MaximumExecutionTimeoutInSeconds"),
            rollback_maximum_batch_size=None if rollback is None else _capacity_size(rollback),
        ),
        alarms=rollback_alarms(p.get("AutoRollbackConfiguration")),
    )


def update_inference_component_input(params: Mapping[str, Any]) -> dict[str, Any]:
    """UpdateInferenceComponent's request as HostingService.update_inference_component's arguments:
    spec and copies None where the request leaves them as they are."""
    refuse_members("UpdateInferenceComponentInput", params)
    raw = params.get("Specification")
    runtime = params.get("RuntimeConfig")
    return {
        "name": params["InferenceComponentName"],
        "spec": None if raw is None else component_spec(raw),
        "copies": None if runtime is None else int(runtime["CopyCount"]),
        "deployment": component_deployment_input(params.get("DeploymentConfig")),
    }


def update_inference_component_runtime_config_input(params: Mapping[str, Any]) -> dict[str, Any]:
    """UpdateInferenceComponentRuntimeConfig: the new copy count (DesiredRuntimeConfig.CopyCount)."""
    return {
        "name": params["InferenceComponentName"],
        "copies": int(params["DesiredRuntimeConfig"]["CopyCount"]),
    }


# --------------------------------------------------------------------------------------- responses


def shaped(value: Any, shape: botocore.model.Shape) -> Any:
    """`value` with only the structure members `shape` has, at every depth: the installed botocore's
    output shape decides what is answered (an older one lacks, e.g., PlacementStatus)."""
    if shape.type_name == "structure" and isinstance(value, dict):
        return {k: shaped(v, shape.members[k]) for k, v in value.items() if k in shape.members}
    if shape.type_name == "list" and isinstance(value, list):
        return [shaped(v, shape.member) for v in value]
    return value


def _output_shape(operation: str) -> botocore.model.Shape:
    shape = operation_model(SAGEMAKER, operation).output_shape
    assert shape is not None, operation
    return shape


def _container_summary(c: InferenceComponent) -> JSON:
    """Specification.Container as described: the artifact and environment given, and the image as
    resolved (DeployedImage; the summary has no Image member)."""
    out: JSON = {}
    if c.deployed_image is not None:
        out["DeployedImage"] = deployed_image(c.deployed_image)
    container = c.spec.container
    if container is not None:
        if container.artifact_url:
            out["ArtifactUrl"] = container.artifact_url
        if container.environment:
            out["Environment"] = dict(container.environment)
    return out


def _compute_output(c: ComputeRequirements) -> JSON:
    out: JSON = {"MinMemoryRequiredInMb": c.min_memory_mb}
    if c.cpus is not None:
        out["NumberOfCpuCoresRequired"] = c.cpus
    if c.accelerators is not None:
        out["NumberOfAcceleratorDevicesRequired"] = c.accelerators
    if c.max_memory_mb is not None:
        out["MaxMemoryRequiredInMb"] = c.max_memory_mb
    return out


def _specification(c: InferenceComponent) -> JSON:
    spec = c.spec
    out: JSON = {}
    if spec.instance_type:
        out["InstanceType"] = spec.instance_type
    if spec.model_name:
        out["ModelName"] = spec.model_name
    if container := _container_summary(c):
        out["Container"] = container
    startup: JSON = {}
    if spec.model_data_download_timeout_s is not None:
        startup["ModelDataDownloadTimeoutInSeconds"] = spec.model_data_download_timeout_s
    if spec.startup_health_check_timeout_s is not None:
        startup["ContainerStartupHealthCheckTimeoutInSeconds"] = spec.startup_health_check_timeout_s
    if startup:
        out["StartupParameters"] = startup
    if spec.compute is not None:
        out["ComputeResourceRequirements"] = _compute_output(spec.compute)
    if spec.base_component_name:
        out["BaseInferenceComponentName"] = spec.base_component_name
    if spec.placement is not PlacementStrategy.SPREAD:  # [U] the default is not echoed
        out["SchedulingConfig"] = {"PlacementStrategy": spec.placement.value}
    return out


def _runtime_config(c: InferenceComponent, runtime: ComponentRuntime | None) -> JSON:
    """RuntimeConfig from the live state; without one (nothing placed yet) the desired count and
    no current copies."""
    if runtime is None:
        return {"DesiredCopyCount": c.desired_copies, "CurrentCopyCount": 0}
    out: JSON = {"DesiredCopyCount": runtime.desired_copies, "CurrentCopyCount": runtime.current_copies}
    if runtime.placement:
        out["PlacementStatus"] = [
            {"InstanceType": p.instance_type, "CurrentCopyCount": p.current_copies} for p in runtime.placement
        ]
    return out


def _capacity_size_output(c: CapacitySize) -> JSON:
    return {"Type": c.type, "Value": c.value}


def component_deployment_output(d: ComponentDeploymentConfig) -> JSON:
    """LastDeploymentConfig: the DeploymentConfig of the last update, as it was given."""
    ru = d.rolling_update
    rolling: JSON = {
        "MaximumBatchSize": _capacity_size_output(ru.maximum_batch_size),
        "WaitIntervalInSeconds": ru.wait_interval_s,
    }
    if ru.maximum_execution_timeout_s is not None:
        rolling["MaximumExecutionTimeoutInSeconds"] = ru.maximum_execution_timeout_s
    if ru.rollback_maximum_batch_size is not None:
        rolling["RollbackMaximumBatchSize"] = _capacity_size_output(ru.rollback_maximum_batch_size)
    out: JSON = {"RollingUpdatePolicy": rolling}
    if d.alarms:
        out["AutoRollbackConfiguration"] = {"Alarms": [{"AlarmName": a} for a in d.alarms]}
    return out


def describe_inference_component(
    c: InferenceComponent, runtime: ComponentRuntime | None, endpoint_arn: str
) -> JSON:
    """DescribeInferenceComponent's answer: the component as created or last updated, with its live
    copy counts (`runtime`, None when nothing is placed)."""
    out: JSON = {
        "InferenceComponentName": c.name,
        "InferenceComponentArn": c.arn,
        "EndpointName": c.endpoint_name,
        "EndpointArn": endpoint_arn,
    }
    if c.variant_name:
        out["VariantName"] = c.variant_name
    if c.failure_reason:
        out["FailureReason"] = c.failure_reason
    out["Specification"] = _specification(c)
    out["RuntimeConfig"] = _runtime_config(c, runtime)
    out["CreationTime"] = epoch_seconds(c.creation_time)
    out["LastModifiedTime"] = epoch_seconds(c.last_modified_time)
    out["InferenceComponentStatus"] = c.status.value
    if c.last_deployment_config is not None:
        out["LastDeploymentConfig"] = component_deployment_output(c.last_deployment_config)
    return shaped(out, _output_shape("DescribeInferenceComponent"))  # type: ignore[no-any-return]


def inference_component_summary(c: InferenceComponent, endpoint_arn: str) -> JSON:
    """One entry of ListInferenceComponents' InferenceComponents."""
    out: JSON = {
        "CreationTime": epoch_seconds(c.creation_time),
        "InferenceComponentArn": c.arn,
        "InferenceComponentName": c.name,
        "EndpointArn": endpoint_arn,
        "EndpointName": c.endpoint_name,
        "VariantName": c.variant_name,
        "InferenceComponentStatus": c.status.value,
        "LastModifiedTime": epoch_seconds(c.last_modified_time),
    }
    member = _output_shape("ListInferenceComponents").members["InferenceComponents"]
    return shaped(out, member.member)  # type: ignore[no-any-return]
