"""model/serverless.py: ServerlessConfig's values, what a serverless variant cannot be combined with,
the CPU share of a memory size (pure rules; the wire's refusals are in test_serverless.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from emulator.errors import ValidationFailed
from emulator.model import serverless
from emulator.model.resources import (
    AsyncInference,
    ContainerDefinition,
    Model,
    ModelDataSource,
    ProductionVariant,
    ServerlessConfig,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def model(name: str = "m", **changes: object) -> Model:
    fields: dict[str, object] = {
        "name": name,
        "arn": f"arn:aws:sagemaker:us-east-1:123456789012:model/{name}",
        "primary_container": ContainerDefinition(image="echo"),
        "creation_time": T0,
        **changes,
    }
    return Model(**fields)  # type: ignore[arg-type]


def variant(
    name: str = "v", model_name: str = "m", config: ServerlessConfig | None = None
) -> ProductionVariant:
    return ProductionVariant(name, model_name, 0, serverless=config or ServerlessConfig(1024, 2))


@pytest.mark.parametrize("memory", serverless.MEMORY_SIZES_MB)
def test_each_allowed_memory_size_passes(memory: int) -> None:
    serverless.check_config("v", ServerlessConfig(memory, 1))


@pytest.mark.parametrize("memory", [1025, 1536, 2047, 6143])
def test_a_memory_size_between_the_allowed_ones_is_refused(memory: int) -> None:
    with pytest.raises(ValidationFailed, match=f"MemorySizeInMB {memory} is not supported"):
        serverless.check_config("v", ServerlessConfig(memory, 1))


def test_provisioned_concurrency_may_equal_but_not_exceed_max_concurrency() -> None:
    serverless.check_config("v", ServerlessConfig(1024, 3, 3))
    with pytest.raises(ValidationFailed, match=r"ProvisionedConcurrency \(4\) of variant v"):
        serverless.check_config("v", ServerlessConfig(1024, 3, 4))


def test_instance_fields_are_refused_and_a_gpu_type_has_its_own_text() -> None:
    serverless.check_variant_fields("v", None, False)
    with pytest.raises(ValidationFailed, match="cannot also have InstanceType"):
        serverless.check_variant_fields("v", None, True)
    with pytest.raises(ValidationFailed, match="cannot also have InstanceType"):
        serverless.check_variant_fields("v", "ml.m5.large", False)
    with pytest.raises(ValidationFailed, match="do not support GPUs"):
        serverless.check_variant_fields("v", "ml.p3.2xlarge", False)


def test_a_config_without_serverless_variants_is_not_checked() -> None:
    plain = ProductionVariant("a", "m")
    serverless.check_endpoint_config(
        [plain, ProductionVariant("b", "m")], lambda _: None, AsyncInference("s3://b/o")
    )


@pytest.mark.parametrize(
    ("found", "text"),
    [
        (
            model(containers=(ContainerDefinition("a"), ContainerDefinition("b"))),
            "is a multi-container model",
        ),
        (model(primary_container=ContainerDefinition("echo", mode="MultiModel")), "is a multi-model model"),
        (model(enable_network_isolation=True), "has EnableNetworkIsolation"),
        (
            model(
                primary_container=ContainerDefinition("echo", model_data=ModelDataSource("s3://b/k", "None"))
            ),
            "uses a ModelDataSource",
        ),
    ],
)
def test_models_a_serverless_variant_cannot_serve(found: Model, text: str) -> None:
    with pytest.raises(ValidationFailed, match=text):
        serverless.check_endpoint_config([variant()], lambda _: found, None)


def test_a_tar_gz_model_is_fine_and_other_variants_or_async_are_refused() -> None:
    tarball = model(
        primary_container=ContainerDefinition("echo", model_data=ModelDataSource("s3://b/m.tar.gz"))
    )
    serverless.check_endpoint_config([variant()], lambda _: tarball, None)
    with pytest.raises(ValidationFailed, match="only one production variant"):
        serverless.check_endpoint_config([variant(), ProductionVariant("b", "m")], lambda _: tarball, None)
    with pytest.raises(ValidationFailed, match="cannot have an AsyncInferenceConfig"):
        serverless.check_endpoint_config([variant()], lambda _: tarball, AsyncInference("s3://b/o"))


def test_warm_containers_and_cpu_share() -> None:
    assert serverless.warm_containers(ServerlessConfig(1024, 5)) == 0
    assert serverless.warm_containers(ServerlessConfig(1024, 5, 2)) == 1
    assert serverless.vcpus(1024) == 0.5
    assert serverless.vcpus(6144) == 3.0
