"""Serverless inference's pure rules (spec §7): the values a ServerlessConfig may take, what a
serverless variant may not be combined with, and the CPU share its memory size buys. No IO; the
refusals' texts are in messages/serverless.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from emulator.errors import ValidationFailed
from emulator.model import messages
from emulator.model.resources import AsyncInference, Model, ProductionVariant, ServerlessConfig

#: MemorySizeInMB: botocore's model allows 1024-6144, SageMaker only these (spec §7).
MEMORY_SIZES_MB = (1024, 2048, 3072, 4096, 5120, 6144)
#: Request and response bodies of a serverless endpoint: 4 MB each way (spec §7), counted as MiB.
MAX_PAYLOAD_BYTES = 4 * 1024 * 1024
#: [U] "vCPUs scale with memory" (spec §7) without figures: smlocal gives one vCPU per 2048 MB
#: (1024 MB: half a core; 6144 MB: three), capped by the engine at the host's cores.
MB_PER_VCPU = 2048
#: Instance types that mean a GPU (serverless endpoints have none).
GPU_PREFIXES = ("ml.g", "ml.p", "ml.inf", "ml.trn")


def check_config(variant_name: str, config: ServerlessConfig) -> None:
    """MemorySizeInMB in SageMaker's set; ProvisionedConcurrency at most MaxConcurrency."""
    if config.memory_size_mb not in MEMORY_SIZES_MB:
        raise ValidationFailed(messages.serverless_memory_size(config.memory_size_mb, MEMORY_SIZES_MB))
    provisioned = config.provisioned_concurrency
    if provisioned is not None and provisioned > config.max_concurrency:
        raise ValidationFailed(
            messages.serverless_provisioned_over_max(variant_name, provisioned, config.max_concurrency)
        )


def check_variant_fields(variant_name: str, instance_type: str | None, has_instance_count: bool) -> None:
    """A serverless variant names no instances: InstanceType (a GPU one has its own text) and
    InitialInstanceCount are refused."""
    if instance_type is not None and instance_type.startswith(GPU_PREFIXES):
        raise ValidationFailed(messages.serverless_gpu(variant_name, instance_type))
    if instance_type is not None or has_instance_count:
        raise ValidationFailed(messages.serverless_with_instances(variant_name))


def check_endpoint_config(
    variants: Sequence[ProductionVariant],
    model_of: Callable[[str], Model | None],
    async_inference: AsyncInference | None,
) -> None:
    """What a config with a serverless variant may not have (spec §7): other variants, an
    AsyncInferenceConfig, a model of several containers or many models, network isolation, a
    ModelDataSource."""
    serverless = [v for v in variants if v.serverless is not None]
    if not serverless:
        return
    if len(variants) > 1:
        raise ValidationFailed(messages.serverless_several_variants())
    if async_inference is not None:
        raise ValidationFailed(messages.serverless_async())
    name = serverless[0].model_name
    model = model_of(name) if name is not None else None
    if model is None:
        return  # the caller reports the missing model
    if model.multi_container:
        raise ValidationFailed(messages.serverless_model_not_supported(model.name, "multi-container"))
    if model.multi_model:
        raise ValidationFailed(messages.serverless_model_not_supported(model.name, "multi-model"))
    if model.enable_network_isolation:
        raise ValidationFailed(messages.serverless_network_isolation(model.name))
    data = model.primary_container.model_data
    uncompressed = data is not None and (data.compression != "Gzip" or data.data_type != "S3Object")
    if uncompressed or model.primary_container.additional_model_data:
        raise ValidationFailed(messages.serverless_model_data_source(model.name))


def warm_containers(config: ServerlessConfig) -> int:
    """Containers kept running whatever the traffic: one with ProvisionedConcurrency, else none
    (smlocal runs one container per serverless variant: docs/serverless.md)."""
    return 1 if config.provisioned_concurrency else 0


def vcpus(memory_size_mb: int) -> float:
    """The CPU share of a container with this much memory."""
    return memory_size_mb / MB_PER_VCPU
