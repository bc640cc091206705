"""SageMaker hosting resources as plain, immutable domain values (no wire shapes, no IO)."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from emulator.model.components import ManagedInstanceScaling
from emulator.model.deployment import DeploymentConfig


class EndpointStatus(enum.StrEnum):
    OUT_OF_SERVICE = "OutOfService"
    CREATING = "Creating"
    UPDATING = "Updating"
    SYSTEM_UPDATING = "SystemUpdating"
    ROLLING_BACK = "RollingBack"
    IN_SERVICE = "InService"
    DELETING = "Deleting"
    FAILED = "Failed"
    UPDATE_ROLLBACK_FAILED = "UpdateRollbackFailed"


class RoutingStrategy(enum.StrEnum):
    LEAST_OUTSTANDING_REQUESTS = "LEAST_OUTSTANDING_REQUESTS"
    RANDOM = "RANDOM"


@dataclass(frozen=True)
class ModelDataSource:
    """Where a model's artifacts come from: s3://, file:// or a plain local path."""

    uri: str
    compression: str = "Gzip"  # "Gzip": one .tar.gz archive | "None": uncompressed object(s)
    data_type: str = "S3Object"  # "S3Object" | "S3Prefix" (with compression "None")
    #: ModelAccessConfig.AcceptEula as given (None: no ModelAccessConfig). A gated model's data
    #: needs True (model_data/gate.py says which data is gated).
    accept_eula: bool | None = None


#: Where SageMaker mounts each AdditionalModelDataSources channel: {root}/{ChannelName}, read-only
#: (the path AWS's CloudFormation/Terraform docs of ChannelName give; the API reference says none).
ADDITIONAL_MODEL_DATA_ROOT = "/opt/ml/additional-model-data-sources"
#: AdditionalModelDataSources: at most this many channels per container [M].
MAX_ADDITIONAL_MODEL_DATA_SOURCES = 5


@dataclass(frozen=True)
class AdditionalModelData:
    """One AdditionalModelDataSources channel: its data, mounted read-only at `mount_path`."""

    channel_name: str
    source: ModelDataSource

    @property
    def mount_path(self) -> str:
        return f"{ADDITIONAL_MODEL_DATA_ROOT}/{self.channel_name}"


@dataclass(frozen=True)
class ContainerDefinition:
    image: str
    environment: Mapping[str, str] = field(default_factory=dict)
    model_data: ModelDataSource | None = None
    hostname: str | None = None
    mode: str = "SingleModel"
    #: MultiModelConfig.ModelCacheSetting: "Enabled" (default) keeps loaded models; "Disabled"
    #: unloads and deletes each after its invocation.
    model_cache_setting: str = "Enabled"
    #: ImageConfig.RepositoryAccessMode: "Platform" (ECR private) or "Vpc" (any registry the model's VPC
    #: reaches: model/image_registry.py accepts every reference); None when no ImageConfig was given.
    repository_access_mode: str | None = None
    #: AdditionalModelDataSources, in the order given (each channel mounted read-only beside
    #: /opt/ml/model).
    additional_model_data: tuple[AdditionalModelData, ...] = ()

    @property
    def all_model_data(self) -> tuple[ModelDataSource, ...]:
        """Every data source the container's instance downloads: its model data, then its channels."""
        main = () if self.model_data is None else (self.model_data,)
        return main + tuple(a.source for a in self.additional_model_data)

    @property
    def multi_model(self) -> bool:
        """Mode MultiModel: ModelDataUrl is a prefix of many artifacts, loaded on demand (spec §5)."""
        return self.mode == "MultiModel"


@dataclass(frozen=True)
class Model:
    name: str
    arn: str
    primary_container: ContainerDefinition
    creation_time: datetime
    execution_role_arn: str | None = None
    enable_network_isolation: bool = False
    tags: tuple[tuple[str, str], ...] = ()
    #: CreateModel's Containers, in order (empty for a model of one PrimaryContainer, whose
    #: `primary_container` is then its only one; for a Containers model it is the first of them)
    containers: tuple[ContainerDefinition, ...] = ()
    #: InferenceExecutionConfig.Mode as given ("Serial" | "Direct"); None: not given (Serial)
    inference_mode: str | None = None

    @property
    def all_containers(self) -> tuple[ContainerDefinition, ...]:
        """The containers every instance runs, in order."""
        return self.containers or (self.primary_container,)

    @property
    def multi_container(self) -> bool:
        """Several containers share each instance (own ports, the bind-to-port label required)."""
        return len(self.containers) > 1

    @property
    def multi_model(self) -> bool:
        """A multi-model endpoint's model: one container in Mode MultiModel."""
        return not self.multi_container and self.primary_container.multi_model

    @property
    def direct(self) -> bool:
        return self.inference_mode == "Direct"

    def hostnames(self) -> tuple[str, ...]:
        """Each container's name: its ContainerHostname, else by position (`container-1`, ...)."""
        return tuple(c.hostname or f"container-{i}" for i, c in enumerate(self.all_containers, start=1))


@dataclass(frozen=True)
class ProductionVariant:
    variant_name: str
    #: None: the variant provides instances for inference components (model/components.py)
    model_name: str | None
    initial_instance_count: int = 1
    instance_type: str | None = None
    initial_variant_weight: float = 1.0
    startup_health_check_timeout_s: int | None = None
    model_data_download_timeout_s: int | None = None
    routing_strategy: RoutingStrategy = RoutingStrategy.LEAST_OUTSTANDING_REQUESTS
    #: VolumeSizeInGB: the instance's ML storage volume (DiskUtilization's denominator).
    volume_size_gb: int | None = None
    #: ServerlessConfig: capacity on demand instead of instances (spec §7; hosting/serverless/).
    #: A serverless variant's initial_instance_count is its warm containers at creation (1 with
    #: ProvisionedConcurrency, else 0).
    serverless: ServerlessConfig | None = None
    #: ManagedInstanceScaling (inference-component variants only)
    managed_instance_scaling: ManagedInstanceScaling | None = None

    @property
    def hosts_components(self) -> bool:
        """A variant without ModelName: its instances start empty and host inference components."""
        return self.model_name is None


@dataclass(frozen=True)
class ServerlessConfig:
    """A production variant's ServerlessConfig (ProductionVariantServerlessConfig)."""

    memory_size_mb: int
    max_concurrency: int
    provisioned_concurrency: int | None = None


@dataclass(frozen=True)
class EndpointConfig:
    name: str
    arn: str
    production_variants: tuple[ProductionVariant, ...]
    creation_time: datetime
    kms_key_id: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    #: AsyncInferenceConfig: the endpoint serves InvokeEndpointAsync only (spec §8)
    async_inference: AsyncInference | None = None
    #: ExecutionRoleArn: the role an inference-component endpoint's components run with
    execution_role_arn: str | None = None

    @property
    def hosts_components(self) -> bool:
        """An inference-component endpoint's config (its variants name no model)."""
        return any(v.hosts_components for v in self.production_variants)


#: MaxConcurrentInvocationsPerInstance when the config gives none: SageMaker "chooses" one [U].
DEFAULT_ASYNC_CONCURRENCY = 4


@dataclass(frozen=True)
class AsyncInference:
    """An endpoint config's AsyncInferenceConfig."""

    s3_output_path: str
    s3_failure_path: str | None = None
    max_concurrent_per_instance: int | None = None
    kms_key_id: str | None = None
    success_topic: str | None = None
    error_topic: str | None = None
    #: IncludeInferenceResponseIn: SUCCESS_NOTIFICATION_TOPIC, ERROR_NOTIFICATION_TOPIC
    include_response_in: tuple[str, ...] = ()

    @property
    def concurrency(self) -> int:
        return self.max_concurrent_per_instance or DEFAULT_ASYNC_CONCURRENCY


@dataclass(frozen=True)
class DeployedImage:
    specified_image: str
    resolved_image: str
    resolution_time: datetime


@dataclass(frozen=True)
class VariantStatus:
    """One entry of a variant's VariantStatus list while it changes (e.g. Updating,
    "Scaling out desired instance count to 3.")."""

    status: str  # Creating | Updating | Deleting | ActivatingTraffic | Baking
    message: str
    start_time: datetime


@dataclass(frozen=True)
class VariantSummary:
    """What DescribeEndpoint reports for one production variant."""

    variant_name: str
    current_weight: float
    desired_weight: float
    current_instance_count: int
    desired_instance_count: int
    deployed_images: tuple[DeployedImage, ...] = ()
    statuses: tuple[VariantStatus, ...] = ()
    instance_type: str | None = None
    #: a serverless variant's config (CurrentServerlessConfig and DesiredServerlessConfig)
    serverless: ServerlessConfig | None = None
    #: an inference-component variant's ManagedInstanceScaling
    managed_instance_scaling: ManagedInstanceScaling | None = None


@dataclass(frozen=True)
class PendingDeployment:
    """DescribeEndpoint's PendingDeploymentSummary while UpdateEndpoint deploys a new config."""

    endpoint_config_name: str
    start_time: datetime
    production_variants: tuple[VariantSummary, ...] = ()


@dataclass(frozen=True)
class Endpoint:
    name: str
    arn: str
    endpoint_config_name: str
    status: EndpointStatus
    creation_time: datetime
    last_modified_time: datetime
    failure_reason: str | None = None
    production_variants: tuple[VariantSummary, ...] = ()
    tags: tuple[tuple[str, str], ...] = ()
    #: (variant, weight, instance count) set by UpdateEndpointWeightsAndCapacities (and autoscaling)
    #: since the endpoint config was deployed; a restart re-launches with them. UpdateEndpoint clears.
    variant_overrides: tuple[tuple[str, float | None, int | None], ...] = ()
    pending_deployment: PendingDeployment | None = None  # live only, never persisted
    #: the DeploymentConfig of CreateEndpoint or the last UpdateEndpoint (LastDeploymentConfig)
    last_deployment_config: DeploymentConfig | None = None
    #: the deployed endpoint config's AsyncInferenceConfig (live only: DescribeEndpoint's copy)
    async_inference: AsyncInference | None = None

    def effective_config(self, config: EndpointConfig) -> EndpointConfig:
        """The endpoint config with this endpoint's weight and capacity overrides applied."""
        if not self.variant_overrides:
            return config
        overrides = {name: (weight, count) for name, weight, count in self.variant_overrides}
        variants = []
        for v in config.production_variants:
            weight, count = overrides.get(v.variant_name, (None, None))
            variants.append(
                dataclasses.replace(
                    v,
                    initial_variant_weight=v.initial_variant_weight if weight is None else weight,
                    initial_instance_count=v.initial_instance_count if count is None else count,
                )
            )
        return dataclasses.replace(config, production_variants=tuple(variants))
