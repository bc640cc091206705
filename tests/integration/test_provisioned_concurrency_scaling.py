"""Application Auto Scaling of a serverless variant's ProvisionedConcurrency
(`sagemaker:variant:DesiredProvisionedConcurrency`, target tracking on
`SageMakerVariantProvisionedConcurrencyUtilization`; shared/spec/hosting-contract.md §7 and §9), through
unchanged boto3 clients against a real server with `--time-scale 60` (a policy minute lasts 1 s) and the
echo image."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from tests.fixtures.scaling import NS, TIME_SCALE, Load, resource, variant_target, wait_for
from tests.fixtures.smlocal_server import CREDENTIALS, Smlocal, error_of, start_smlocal

PC_DIM = "sagemaker:variant:DesiredProvisionedConcurrency"
PC_METRIC = "SageMakerVariantProvisionedConcurrencyUtilization"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, echo_image: str) -> Iterator[Smlocal]:
    smlocal = start_smlocal(tmp_path_factory.mktemp("pc-scaling"), echo_image, time_scale=TIME_SCALE)
    try:
        yield smlocal
    finally:
        smlocal.server.stop()


def pc_target(endpoint: str) -> dict[str, str]:
    return {"ServiceNamespace": NS, "ResourceId": resource(endpoint), "ScalableDimension": PC_DIM}


def autoscaling(env: Smlocal) -> Any:
    return boto3.client("application-autoscaling", endpoint_url=env.server.url, **CREDENTIALS)


def deploy(env: Smlocal, name: str, serverless: dict[str, int] | None) -> None:
    env.sm.create_model(ModelName=name, PrimaryContainer={"Image": env.image})
    variant: dict[str, Any] = {"VariantName": "AllTraffic", "ModelName": name}
    if serverless is None:
        variant.update(InitialInstanceCount=1, InstanceType="ml.m5.large")
    else:
        variant["ServerlessConfig"] = {"MemorySizeInMB": 1024, **serverless}
    env.sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[variant])
    env.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    assert env.wait(name)["EndpointStatus"] == "InService"


def provisioned(env: Smlocal, name: str) -> tuple[str, int | None]:
    described = env.sm.describe_endpoint(EndpointName=name)
    config = described["ProductionVariants"][0]["CurrentServerlessConfig"]
    return described["EndpointStatus"], config.get("ProvisionedConcurrency")


def test_provisioned_concurrency_targets_are_validated(env: Smlocal) -> None:
    aas = autoscaling(env)
    cases = [("pc-none", {"MaxConcurrency": 4}), ("pc-real-time", None), ("pc-range", None)]
    try:
        deploy(env, "pc-none", {"MaxConcurrency": 4})
        deploy(env, "pc-real-time", None)
        deploy(env, "pc-range", {"MaxConcurrency": 4, "ProvisionedConcurrency": 1})
        refused: list[tuple[dict[str, Any], str]] = [
            (
                dict(**pc_target("pc-none"), MinCapacity=1, MaxCapacity=2),
                "Variant AllTraffic of endpoint pc-none has no ProvisionedConcurrency: only a serverless "
                "variant with ProvisionedConcurrency can be scaled in sagemaker:variant:DesiredProvisionedConcurrency.",
            ),
            (
                dict(**pc_target("pc-real-time"), MinCapacity=1, MaxCapacity=2),
                "Variant AllTraffic of endpoint pc-real-time has no ProvisionedConcurrency: only a serverless "
                "variant with ProvisionedConcurrency can be scaled in sagemaker:variant:DesiredProvisionedConcurrency.",
            ),
            (
                dict(**pc_target("pc-range"), MinCapacity=1, MaxCapacity=5),
                "MinCapacity (1) and MaxCapacity (5) of a sagemaker:variant:DesiredProvisionedConcurrency target "
                "must be between 1 and the MaxConcurrency (4) of variant AllTraffic.",
            ),
            (
                dict(**pc_target("pc-range"), MinCapacity=0, MaxCapacity=4),
                "MinCapacity (0) and MaxCapacity (4) of a sagemaker:variant:DesiredProvisionedConcurrency target "
                "must be between 1 and the MaxConcurrency (4) of variant AllTraffic.",
            ),
        ]
        for params, message in refused:
            with pytest.raises(ClientError) as exc:
                aas.register_scalable_target(**params)
            assert error_of(exc.value) == ("ValidationException", 400, message), params
        aas.register_scalable_target(**pc_target("pc-range"), MinCapacity=1, MaxCapacity=4)
        with pytest.raises(ClientError) as wrong_metric:
            aas.put_scaling_policy(
                PolicyName="per-instance",
                **pc_target("pc-range"),
                PolicyType="TargetTrackingScaling",
                TargetTrackingScalingPolicyConfiguration={
                    "TargetValue": 70.0,
                    "PredefinedMetricSpecification": {
                        "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
                    },
                },
            )
        assert error_of(wrong_metric.value) == (
            "ValidationException",
            400,
            f"Scalable dimension {PC_DIM} only supports the following predefined metric types: {PC_METRIC}",
        )
        with pytest.raises(ClientError) as instance_metric:  # ... and the other way round
            aas.register_scalable_target(
                **variant_target(resource("pc-real-time")), MinCapacity=1, MaxCapacity=2
            )
            aas.put_scaling_policy(
                PolicyName="pc",
                **variant_target(resource("pc-real-time")),
                PolicyType="TargetTrackingScaling",
                TargetTrackingScalingPolicyConfiguration={
                    "TargetValue": 0.5,
                    "PredefinedMetricSpecification": {"PredefinedMetricType": PC_METRIC},
                },
            )
        assert error_of(instance_metric.value)[2] == (
            "Scalable dimension sagemaker:variant:DesiredInstanceCount only supports the following predefined "
            "metric types: SageMakerVariantInvocationsPerInstance"
        )
        described = aas.describe_scalable_targets(ServiceNamespace=NS, ScalableDimension=PC_DIM)
        assert [
            (t["ResourceId"], t["MinCapacity"], t["MaxCapacity"]) for t in described["ScalableTargets"]
        ] == [(resource("pc-range"), 1, 4)]
    finally:
        for name, _ in cases:
            env.cleanup(name)


@pytest.mark.slow
def test_target_tracking_scales_provisioned_concurrency_out_and_back_in(env: Smlocal) -> None:
    """Sequential requests keep the one provisioned execution busy (utilization 1.0 > target 0.5):
    3 periods scale ProvisionedConcurrency out to ceil(1 x 1.0 / 0.5) = 2, through
    ServerlessUpdateConfig (the endpoint Updating, then InService); without requests the utilization
    is 0 and, after 15 periods and the scale-in cooldown, it goes back to MinCapacity 1."""
    name = "pc-tracking"
    aas = autoscaling(env)
    try:
        deploy(env, name, {"MaxConcurrency": 4, "ProvisionedConcurrency": 1})
        aas.register_scalable_target(**pc_target(name), MinCapacity=1, MaxCapacity=3)
        policy = aas.put_scaling_policy(
            PolicyName="pc-utilization",
            **pc_target(name),
            PolicyType="TargetTrackingScaling",
            TargetTrackingScalingPolicyConfiguration={
                "TargetValue": 0.5,
                "PredefinedMetricSpecification": {"PredefinedMetricType": PC_METRIC},
                "ScaleInCooldown": 60,
                "ScaleOutCooldown": 60,
            },
        )
        assert len(policy["Alarms"]) == 2
        with Load(env, name, rate=20.0) as load:
            wait_for(
                "a scale-out to 2", lambda: provisioned(env, name) == ("InService", 2), 30 / TIME_SCALE * 60
            )
        assert load.failures == []
        wait_for(
            "the scale-in to 1", lambda: provisioned(env, name) == ("InService", 1), 45 / TIME_SCALE * 60
        )
        activities = aas.describe_scaling_activities(ServiceNamespace=NS, ResourceId=resource(name))[
            "ScalingActivities"
        ]
        assert [(a["Description"], a["StatusCode"], a["StatusMessage"]) for a in activities] == [
            (
                "Setting desired provisioned concurrency to 1.",
                "Successful",
                "Successfully set desired provisioned concurrency to 1. Change successfully fulfilled by sagemaker.",
            ),
            (
                "Setting desired provisioned concurrency to 2.",
                "Successful",
                "Successfully set desired provisioned concurrency to 2. Change successfully fulfilled by sagemaker.",
            ),
        ]
        assert all(a["ScalableDimension"] == PC_DIM for a in activities)
        assert "AlarmHigh" in activities[1]["Cause"] and "AlarmLow" in activities[0]["Cause"]
        config = env.sm.describe_endpoint(EndpointName=name)["ProductionVariants"][0][
            "DesiredServerlessConfig"
        ]
        assert config == {"MemorySizeInMB": 1024, "MaxConcurrency": 4, "ProvisionedConcurrency": 1}
    finally:
        env.cleanup(name)
