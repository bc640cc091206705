"""Autoscaling of inference components without containers: resource ids, the refusals by their exact
texts, the floor of MinCapacity 0, a step policy scaling out from zero through a stub hosting service,
DeleteInferenceComponent deregistering, and the component metrics' series."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import pytest

from emulator.config import ServerConfig
from emulator.errors import ValidationFailed
from emulator.hosting.endpoints.service import HostingService
from emulator.hosting.monitoring.catalogue import COMPONENT_LEVEL, SeriesKey, locate
from emulator.hosting.monitoring.component_load import per_copy
from emulator.hosting.monitoring.store import CLIENT_ERROR, OK, Metrics
from emulator.hosting.scaling.autoscaler import AutoScaler
from emulator.hosting.scaling.registry import resource_of, variant_of
from emulator.model import messages
from emulator.model import scaling as sc
from emulator.model.components import ComponentSpec, ComponentStatus, InferenceComponent
from tests.unit.autoscaler_rig import StubAsync, StubDeployer

NAME = "ic"
KEY = sc.TargetKey(sc.SERVICE_NAMESPACE, f"inference-component/{NAME}", sc.COMPONENT_DIMENSION)
WHEN = datetime(2026, 1, 1, tzinfo=UTC)


def test_parse_component_id() -> None:
    assert sc.parse_component_id("inference-component/my-ic") == sc.ComponentRef("my-ic")
    for bad in ("inference-component/", "inference-component/a/b", "endpoint/e/variant/v", "ic/x", ""):
        assert sc.parse_component_id(bad) is None, bad


def test_scalable_ref_matches_the_dimension() -> None:
    assert sc.scalable_ref(KEY) == sc.ComponentRef(NAME)
    variant = sc.TargetKey(sc.SERVICE_NAMESPACE, "endpoint/e/variant/v", sc.VARIANT_DIMENSION)
    assert sc.scalable_ref(variant) == sc.VariantRef("e", "v")
    assert sc.scalable_ref(dataclasses.replace(KEY, dimension=sc.VARIANT_DIMENSION)) is None
    assert sc.scalable_ref(dataclasses.replace(variant, dimension=sc.COMPONENT_DIMENSION)) is None
    assert sc.scalable_ref(dataclasses.replace(KEY, namespace="ecs")) is None


def test_refusals_by_text() -> None:
    component_text = (
        "Unsupported resource ID or scalable dimension for an inference component. smlocal scales "
        "inference-component/{InferenceComponentName} resources in the "
        "sagemaker:inference-component:DesiredCopyCount dimension."
    )
    for key in (
        dataclasses.replace(KEY, dimension=sc.VARIANT_DIMENSION),
        sc.TargetKey(sc.SERVICE_NAMESPACE, "endpoint/e/variant/v", sc.COMPONENT_DIMENSION),
        dataclasses.replace(KEY, resource_id="inference-component/a/b"),
    ):
        with pytest.raises(ValidationFailed) as refused:
            resource_of(key)
        assert refused.value.message == component_text
    # a variant's refusal is unchanged
    with pytest.raises(ValidationFailed) as refused:
        resource_of(sc.TargetKey(sc.SERVICE_NAMESPACE, "endpoint/e", sc.VARIANT_DIMENSION))
    assert refused.value.message == messages.unsupported_scalable_target()
    with pytest.raises(ValidationFailed) as refused:
        variant_of(KEY)
    assert refused.value.message == messages.unsupported_scalable_target()
    assert messages.scaling_component_not_found("x") == "The inference component x does not exist."
    assert messages.component_not_in_service("x", "Creating") == (
        "Inference component x is in Creating status. "
        "The status should be in 'InService' to register it as a scalable target."
    )


class ComponentService:
    """A stub HostingService with one inference component whose runtime config updates finish when
    the test says so."""

    def __init__(self, copies: int, status: ComponentStatus = ComponentStatus.IN_SERVICE) -> None:
        self.record = InferenceComponent(
            NAME, f"arn:aws:sagemaker:us-east-1:123456789012:inference-component/{NAME}", "ep",
            "AllTraffic", ComponentSpec(), copies, WHEN, WHEN, status,
        )  # fmt: skip
        self.inference_components = {NAME: self.record}
        self.updates: list[int] = []
        self.deployer = StubDeployer()
        self.async_inference = StubAsync()
        self.deletion_listeners: list = []
        self.component_deletion_listeners: list = []
        self.update_guards: list = []

    def describe_inference_component(self, name: str) -> InferenceComponent:
        if name != NAME or self.record is None:
            raise ValidationFailed(f"Could not find inference component {name}.")
        return self.record

    def update_inference_component_runtime_config(self, name: str, copies: int) -> InferenceComponent:
        self.updates.append(copies)
        self.record = dataclasses.replace(self.record, desired_copies=copies, status=ComponentStatus.UPDATING)
        return self.record

    def finish(
        self, status: ComponentStatus = ComponentStatus.IN_SERVICE, failure: str | None = None
    ) -> None:
        self.record = dataclasses.replace(self.record, status=status, failure_reason=failure)


def scaler_of(tmp_path: Path, service: ComponentService) -> AutoScaler:
    metrics = Metrics(period_s=60.0, clock=lambda: 1000.0)
    config = ServerConfig(state_dir=tmp_path, time_scale=1.0)
    return AutoScaler(config, cast(HostingService, service), metrics)


def test_register_refusals(tmp_path: Path) -> None:
    service = ComponentService(1, ComponentStatus.CREATING)
    scaler = scaler_of(tmp_path, service)
    with pytest.raises(ValidationFailed) as refused:
        scaler.register_scalable_target(KEY, 0, 2, None, None, ())
    assert refused.value.message == messages.component_not_in_service(NAME, "Creating")
    gone = dataclasses.replace(KEY, resource_id="inference-component/other")
    with pytest.raises(ValidationFailed) as refused:
        scaler.register_scalable_target(gone, 0, 2, None, None, ())
    assert refused.value.message == messages.scaling_component_not_found("other")


async def _until(predicate: object, what: str) -> None:
    """Let the activity's task run (its polls sleep briefly) until `predicate()` holds, 5 s at most."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5.0
    while not predicate():  # type: ignore[operator]
        assert loop.time() < deadline, what
        await asyncio.sleep(0.01)


async def test_step_policy_scales_out_from_zero_and_delete_deregisters(tmp_path: Path) -> None:
    service = ComponentService(0)
    scaler = scaler_of(tmp_path, service)
    target = scaler.register_scalable_target(KEY, 0, 2, None, None, ())
    assert target.min_capacity == 0 and service.updates == []  # 0 copies is within range
    config = sc.StepScaling("ChangeInCapacity", (sc.StepAdjustment(0.0, None, 1),))
    policy = scaler.registry.put_scaling_policy("zero", KEY, sc.PolicyType.STEP, None, config)
    assert scaler.alarm_fired(policy.arn, "no-capacity", 1.0, 1.0)
    await _until(lambda: service.updates == [1], "UpdateInferenceComponentRuntimeConfig")
    await asyncio.sleep(0.25)  # still Updating: the activity waits
    [activity] = scaler.describe_scaling_activities(sc.SERVICE_NAMESPACE, None, None, False)
    assert (activity.description, activity.status) == ("Setting desired copy count to 1.", "InProgress")
    service.finish()
    await _until(
        lambda: (
            scaler.describe_scaling_activities(sc.SERVICE_NAMESPACE, None, None, False)[0].status
            == sc.ActivityStatus.SUCCESSFUL
        ),
        "the activity's success",
    )
    [activity] = scaler.describe_scaling_activities(sc.SERVICE_NAMESPACE, None, None, False)
    assert activity.status_message == (
        "Successfully set desired copy count to 1. Change successfully fulfilled by sagemaker."
    )
    for listener in service.component_deletion_listeners:
        listener(NAME.upper())  # names match ignoring case
    assert scaler.registry.targets == {} and scaler.registry.policies == {}
    await scaler.close()


async def test_failed_update_is_a_failed_activity(tmp_path: Path) -> None:
    service = ComponentService(1)
    scaler = scaler_of(tmp_path, service)
    scaler.register_scalable_target(KEY, 0, 3, None, None, ())
    config = sc.StepScaling("ExactCapacity", (sc.StepAdjustment(0.0, None, 3),))
    policy = scaler.registry.put_scaling_policy("exact", KEY, sc.PolicyType.STEP, None, config)
    scaler.alarm_fired(policy.arn, "a", 5.0, 1.0)
    await _until(lambda: service.updates == [3], "UpdateInferenceComponentRuntimeConfig")
    service.finish(ComponentStatus.FAILED, "no room")
    await _until(
        lambda: (
            scaler.describe_scaling_activities(sc.SERVICE_NAMESPACE, None, None, False)[0].status
            == sc.ActivityStatus.FAILED
        ),
        "the activity's failure",
    )
    [activity] = scaler.describe_scaling_activities(sc.SERVICE_NAMESPACE, None, None, False)
    assert activity.status_message == "Failed to set desired copy count to 3. Reason: no room"
    await scaler.close()


def test_component_series() -> None:
    metrics = Metrics(period_s=60.0, clock=lambda: 6000.0)
    index = metrics.period_index()
    for _ in range(4):
        metrics.record_component(NAME, 2, OK, 0.01, 0.02)
    metrics.record_component(NAME, 2, CLIENT_ERROR, 0.01, 0.02)
    metrics.record_component_value(NAME, "NoCapacityInvocationFailures", 1.0)
    metrics.record_component_value(NAME, "ConcurrentRequestsPerCopy", 1.5)
    read = lambda name, stat: metrics.datapoint(NAME, COMPONENT_LEVEL, name, stat, index)  # noqa: E731
    assert read("Invocations", "Sum") == 5
    assert read("InvocationsPerCopy", "Sum") == 2.5
    assert read("Invocation4XXErrors", "Sum") == 1
    assert read("NoCapacityInvocationFailures", "Sum") == 1
    assert read("ConcurrentRequestsPerCopy", "Average") == 1.5
    assert read("InvocationsPerInstance", "Sum") is None  # a variant's metric only
    dims = (("InferenceComponentName", NAME),)
    assert locate("AWS/SageMaker", "InvocationsPerCopy", dims) == SeriesKey(NAME, COMPONENT_LEVEL)
    assert (
        locate("AWS/SageMaker", "InvocationsPerCopy", (("EndpointName", "e"), ("VariantName", "v"))) is None
    )
    assert SeriesKey(NAME, COMPONENT_LEVEL).dimensions() == dims
    published = {(name, key) for _, name, key in metrics.published()}
    assert ("NoCapacityInvocationFailures", SeriesKey(NAME, COMPONENT_LEVEL)) in published
    metrics.forget_component(NAME)
    assert metrics.published() == []


def test_per_copy_sample() -> None:
    assert per_copy((3, 2)) == 1.5
    assert per_copy((0, 0)) is None
    assert per_copy(None) is None
