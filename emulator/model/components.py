"""Inference components as plain, immutable domain values (no wire shapes, no IO).

An endpoint whose production variant names no model provides instances; each model is deployed onto
them as an inference component: its own container (a model's, or an image with an artifact), its own
reservation of the instance's CPUs, memory and accelerators, and its own number of copies. Each copy
is one container, placed on one of the variant's instances (model/placement.py).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

#: Where an adapter's artifact is found inside its base's container [U]: the folder the LMI / TGI
#: style containers read LoRA adapters from (docs/inference-components.md).
ADAPTER_ROOT = "/opt/ml/adapters"
#: The header an adapter's invocation reaches its base's container with (SageMaker's adapter API, as
#: AWS's model_hosting_container_standards reads it): the adapter's name.
ADAPTER_HEADER = "X-Amzn-SageMaker-Adapter-Identifier"


class ComponentStatus(enum.StrEnum):
    CREATING = "Creating"
    IN_SERVICE = "InService"
    UPDATING = "Updating"
    FAILED = "Failed"
    DELETING = "Deleting"


class PlacementStrategy(enum.StrEnum):
    SPREAD = "SPREAD"
    BINPACK = "BINPACK"


@dataclass(frozen=True)
class ComputeRequirements:
    """ComputeResourceRequirements: what one copy reserves of its instance."""

    min_memory_mb: int
    cpus: float | None = None
    accelerators: float | None = None
    max_memory_mb: int | None = None

    @property
    def memory_limit_mb(self) -> int:
        """The copy container's memory limit: MaxMemoryRequiredInMb, else MinMemoryRequiredInMb [U]."""
        return self.max_memory_mb or self.min_memory_mb


@dataclass(frozen=True)
class ComponentContainer:
    """InferenceComponentContainerSpecification: an image (and its artifact) instead of a model."""

    image: str | None = None
    artifact_url: str | None = None
    environment: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ComponentSpec:
    """InferenceComponentSpecification."""

    model_name: str | None = None
    container: ComponentContainer | None = None
    compute: ComputeRequirements | None = None
    #: StartupParameters
    model_data_download_timeout_s: int | None = None
    startup_health_check_timeout_s: int | None = None
    #: an adapter: served by its base's copies (no copies, no compute of its own)
    base_component_name: str | None = None
    placement: PlacementStrategy = PlacementStrategy.SPREAD
    instance_type: str | None = None

    @property
    def adapter(self) -> bool:
        return self.base_component_name is not None


@dataclass(frozen=True)
class CapacitySize:
    """InferenceComponentCapacitySize: COPY_COUNT or CAPACITY_PERCENT."""

    type: str  # "COPY_COUNT" | "CAPACITY_PERCENT"
    value: int

    def copies(self, of: int) -> int:
        """The batch in copies, at least one, of a component of `of` copies."""
        if self.type == "CAPACITY_PERCENT":
            return max(1, (of * self.value) // 100)
        return max(1, self.value)


@dataclass(frozen=True)
class RollingUpdatePolicy:
    maximum_batch_size: CapacitySize
    wait_interval_s: int
    maximum_execution_timeout_s: int | None = None
    rollback_maximum_batch_size: CapacitySize | None = None


@dataclass(frozen=True)
class ComponentDeploymentConfig:
    """UpdateInferenceComponent's DeploymentConfig."""

    rolling_update: RollingUpdatePolicy
    alarms: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeployedComponentImage:
    specified_image: str
    resolved_image: str
    resolution_time: datetime


@dataclass(frozen=True)
class InferenceComponent:
    """One inference component as the control plane knows it (DescribeInferenceComponent reads the
    live copy counts and placement from the hosting side)."""

    name: str
    arn: str
    endpoint_name: str
    variant_name: str
    spec: ComponentSpec
    desired_copies: int
    creation_time: datetime
    last_modified_time: datetime
    status: ComponentStatus = ComponentStatus.CREATING
    failure_reason: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    last_deployment_config: ComponentDeploymentConfig | None = None
    #: the image its copies run, once resolved (Specification.Container.DeployedImage)
    deployed_image: DeployedComponentImage | None = None


@dataclass(frozen=True)
class PlacementSummary:
    """RuntimeConfig.PlacementStatus: copies per instance type."""

    instance_type: str
    current_copies: int


@dataclass(frozen=True)
class ComponentRuntime:
    """DescribeInferenceComponent's RuntimeConfig."""

    desired_copies: int
    current_copies: int
    placement: tuple[PlacementSummary, ...] = ()


@dataclass(frozen=True)
class ManagedInstanceScaling:
    """A production variant's ManagedInstanceScaling (inference-component endpoints only)."""

    enabled: bool
    min_instances: int | None = None
    max_instances: int | None = None
    scale_in_strategy: str | None = None

    def floor(self, initial: int) -> int:
        """The fewest instances the variant keeps."""
        if not self.enabled:
            return initial
        return self.min_instances if self.min_instances is not None else initial

    def ceiling(self, initial: int) -> int:
        """The most instances the variant may grow to."""
        if not self.enabled:
            return initial
        return self.max_instances if self.max_instances is not None else initial
