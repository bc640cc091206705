"""Inference components' pure parts: a copy's container limits (instance_limits.component_limits),
the records on disk (component_state: every field back as it was), the endpoint config rules
(model/component_rules.py) by their texts."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest

from emulator.config import ServerConfig
from emulator.errors import ValidationFailed
from emulator.hosting.endpoints import component_state
from emulator.hosting.fleet import instance_limits
from emulator.hosting.fleet.plan import VariantPlan
from emulator.model import component_rules
from emulator.model.components import (
    CapacitySize,
    ComponentContainer,
    ComponentDeploymentConfig,
    ComponentSpec,
    ComponentStatus,
    ComputeRequirements,
    DeployedComponentImage,
    InferenceComponent,
    ManagedInstanceScaling,
    PlacementStrategy,
    RollingUpdatePolicy,
)
from emulator.model.resources import AsyncInference, ContainerDefinition, Model, ProductionVariant
from emulator.runtime.base import HostResources, ResolvedImage

MIB = 2**20
HOST = HostResources(memory_bytes=64 * 2**30, cpus=16, nvidia_runtime=True)
T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def copy_plan(instance_type: str, compute: ComputeRequirements | None) -> VariantPlan:
    variant = ProductionVariant("AllTraffic", "m", instance_type=instance_type)
    model = Model("m", "arn:m", ContainerDefinition("img"), T0)
    image = ResolvedImage("img", "img", "sha256:1")
    return VariantPlan("e", variant, model, image, None, component="c", compute=compute)


def test_a_copy_gets_its_reservation_within_its_instance_type(tmp_path: Path) -> None:
    config = ServerConfig(state_dir=tmp_path)
    limited = instance_limits.component_limits(
        config, copy_plan("ml.m5.large", ComputeRequirements(512, cpus=0.5, max_memory_mb=1024)), HOST
    )
    assert (limited.memory_limit_bytes, limited.cpus, limited.gpus) == (1024 * MIB, 0.5, False)
    at_minimum = instance_limits.component_limits(
        config, copy_plan("ml.m5.large", ComputeRequirements(700)), HOST
    )
    assert (at_minimum.memory_limit_bytes, at_minimum.cpus) == (700 * MIB, 2.0)  # no cores given: the type's
    capped = instance_limits.component_limits(
        config, copy_plan("ml.m5.large", ComputeRequirements(64_000, cpus=8)), HOST
    )
    assert (capped.memory_limit_bytes, capped.cpus) == (8 * 2**30, 2.0)
    gpu = instance_limits.component_limits(
        config, copy_plan("ml.g5.12xlarge", ComputeRequirements(1024, accelerators=1.5)), HOST
    )
    assert (gpu.gpus, gpu.gpu_count) == (True, 2)
    off = ServerConfig(state_dir=tmp_path, instance_limits=False)
    unlimited = instance_limits.component_limits(
        off, copy_plan("ml.m5.large", ComputeRequirements(512)), HOST
    )
    assert unlimited.memory_limit_bytes is None


def test_the_digest_names_the_component_and_its_compute_not_the_instance() -> None:
    a = copy_plan("ml.m5.large", ComputeRequirements(512))
    assert a.spec_digest(8080) == dataclasses.replace(a, host_id="i-1").spec_digest(8080)
    assert a.spec_digest(8080) != dataclasses.replace(a, compute=ComputeRequirements(513)).spec_digest(8080)
    assert a.spec_digest(8080) != dataclasses.replace(a, component=None).spec_digest(8080)


def test_components_and_instance_ids_come_back_from_disk_as_they_were(tmp_path: Path) -> None:
    full = InferenceComponent(
        name="c",
        arn="arn:c",
        endpoint_name="e",
        variant_name="AllTraffic",
        spec=ComponentSpec(
            container=ComponentContainer("img", "s3://b/a.tar.gz", {"K": "V"}),
            compute=ComputeRequirements(512, 0.5, 1.0, 1024),
            model_data_download_timeout_s=60,
            startup_health_check_timeout_s=30,
            placement=PlacementStrategy.BINPACK,
        ),
        desired_copies=3,
        creation_time=T0,
        last_modified_time=T0,
        status=ComponentStatus.UPDATING,
        failure_reason="why",
        tags=(("k", "v"),),
        last_deployment_config=ComponentDeploymentConfig(
            RollingUpdatePolicy(CapacitySize("COPY_COUNT", 1), 5, 600, CapacitySize("CAPACITY_PERCENT", 50)),
            ("alarm",),
        ),
        deployed_image=DeployedComponentImage("img", "img@sha256:1", T0),
    )
    adapter = InferenceComponent(
        "a", "arn:a", "e", "AllTraffic", ComponentSpec(base_component_name="c"), 0, T0, T0
    )
    path = component_state.path_in(tmp_path)
    snapshot = component_state.ComponentSnapshot([full, adapter], {"e": {"AllTraffic": ["i-1", "i-2"]}})
    component_state.save(path, snapshot)
    assert component_state.load(path) == snapshot
    assert component_state.load(tmp_path / "none.json") == component_state.ComponentSnapshot()


def variant(model: str | None = None, **extra: object) -> ProductionVariant:
    return ProductionVariant("AllTraffic", model, instance_type="ml.m5.large", **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("variants", "role", "async_config", "text"),
    [
        (
            [variant("m", managed_instance_scaling=ManagedInstanceScaling(True, 1, 2))],
            None,
            None,
            "ManagedInstanceScaling is only supported for inference component endpoints.",
        ),
        ([variant(None)], None, None, "ExecutionRoleArn is required"),
        ([variant(None), dataclasses.replace(variant("m"), variant_name="B")], "r", None, "Either every"),
        ([variant(None)], "r", AsyncInference("s3://b/o"), "AsyncInferenceConfig is not supported"),
        ([dataclasses.replace(variant(None), instance_type=None)], "r", None, "it needs an InstanceType"),
        (
            [variant(None, managed_instance_scaling=ManagedInstanceScaling(True, 3, 2))],
            "r",
            None,
            "MinInstanceCount (3) must not be more than MaxInstanceCount (2).",
        ),
    ],
)
def test_the_endpoint_config_rules(
    variants: list[ProductionVariant], role: str | None, async_config: AsyncInference | None, text: str
) -> None:
    with pytest.raises(ValidationFailed) as refused:
        component_rules.check_endpoint_config(variants, role, async_config)
    assert text in refused.value.message


def test_a_config_for_components_with_its_role_passes() -> None:
    managed = ManagedInstanceScaling(True, 0, 4)
    component_rules.check_endpoint_config([variant(None, managed_instance_scaling=managed)], "r", None)
    component_rules.check_endpoint_config([variant("m")], None, None)  # a plain config: untouched
