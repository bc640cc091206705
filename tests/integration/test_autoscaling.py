"""Application Auto Scaling on the same port, through boto3's unchanged application-autoscaling client,
against real echo containers. The server runs with --time-scale 60: a policy minute is one second."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.fixtures.scaling import (
    DIM,
    NS,
    TIME_SCALE,
    Load,
    resource,
    time_scaled_server,
    variant_of,
    variant_target,
    wait_for,
)
from tests.fixtures.smlocal_server import CREDENTIALS, Smlocal, error_of, start_smlocal

pytestmark = pytest.mark.docker

PER_INSTANCE = {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"}


@pytest.fixture(scope="module")
def smlocal(
    tmp_path_factory: pytest.TempPathFactory, echo_image: str, s3_server: str, aws_credentials: None
) -> Iterator[Smlocal]:
    yield from time_scaled_server(tmp_path_factory.mktemp("smlocal"), echo_image, s3_server)


@pytest.fixture(scope="module")
def aas(smlocal: Smlocal) -> Any:
    config = Config(retries={"mode": "standard", "max_attempts": 1})
    return boto3.client(
        "application-autoscaling", endpoint_url=smlocal.server.url, config=config, **CREDENTIALS
    )


def test_target_tracking_scales_out_under_load_and_in_when_idle(smlocal: Smlocal, aas: Any) -> None:
    smlocal.deploy("Scaled", count=1)
    rid = resource("Scaled")
    try:
        arn = aas.register_scalable_target(**variant_target(rid), MinCapacity=1, MaxCapacity=3)[
            "ScalableTargetARN"
        ]
        assert arn.startswith("arn:aws:application-autoscaling:us-east-1:123456789012:scalable-target/")
        put = aas.put_scaling_policy(
            PolicyName="per-instance",
            **variant_target(rid),
            PolicyType="TargetTrackingScaling",
            TargetTrackingScalingPolicyConfiguration={
                "TargetValue": 20.0,
                "PredefinedMetricSpecification": PER_INSTANCE,
                "ScaleOutCooldown": 60,
                "ScaleInCooldown": 60,
            },
        )
        assert [a["AlarmName"].split("-Alarm")[1].split("-")[0] for a in put["Alarms"]] == ["High", "Low"]
        assert put["Alarms"][0]["AlarmName"].startswith(f"TargetTracking-{rid}-AlarmHigh-")
        # the managed alarms show in CloudWatch, as Application Auto Scaling creates them
        cw = boto3.client("cloudwatch", endpoint_url=smlocal.server.url, **CREDENTIALS)
        high, low = cw.describe_alarms(AlarmNamePrefix=f"TargetTracking-{rid}-")["MetricAlarms"]
        assert [high["AlarmName"], low["AlarmName"]] == [a["AlarmName"] for a in put["Alarms"]]
        assert (high["MetricName"], high["Statistic"], high["Threshold"], high["EvaluationPeriods"]) == (
            "InvocationsPerInstance",
            "Sum",
            20.0,
            3,
        )
        assert (low["ComparisonOperator"], low["Threshold"], low["EvaluationPeriods"]) == (
            "LessThanThreshold",
            18.0,
            15,
        )
        assert high["AlarmActions"] == [put["PolicyARN"]]
        assert (
            high["AlarmDescription"]
            == f"DO NOT EDIT OR DELETE. For TargetTrackingScaling policy {put['PolicyARN']}."
        )

        def alarm_state(name: str) -> str:
            state: str = cw.describe_alarms(AlarmNames=[name])["MetricAlarms"][0]["StateValue"]
            return state

        timeline: list[tuple[float, str]] = []
        statuses: set[str] = set()
        t0 = time.monotonic()
        load = Load(smlocal, "Scaled", rate=100.0)  # ~100 per policy minute: 5x the target on 1 instance
        load.start()
        try:

            def scaled_out() -> bool:
                v = variant_of(smlocal, "Scaled")
                statuses.add(v["EndpointStatus"])
                return v["EndpointStatus"] == "InService" and v["CurrentInstanceCount"] == 3

            wait_for("scale-out to 3 instances", scaled_out, 30)
            timeline.append((time.monotonic() - t0, "3 instances InService"))
            assert alarm_state(high["AlarmName"]) == "ALARM"  # still 5/3 of the target per instance

            # still 5/3 x the target at the maximum: the policy wants more and records why it cannot
            def at_max() -> list[dict[str, Any]]:
                acts = aas.describe_scaling_activities(
                    ServiceNamespace=NS, ResourceId=rid, IncludeNotScaledActivities=True
                )["ScalingActivities"]
                return [a for a in acts if a.get("NotScaledReasons")]

            not_scaled = wait_for("a not-scaled activity at the maximum", at_max, 15)
            timeline.append((time.monotonic() - t0, "not scaled: AlreadyAtMaxCapacity"))
        finally:
            load.stop.set()
            load.join()
        timeline.append((time.monotonic() - t0, f"load stopped after {load.sent} requests"))
        assert load.failures == []  # scaling out never fails a request
        assert not_scaled[0]["NotScaledReasons"] == [
            {"Code": "AlreadyAtMaxCapacity", "MaxCapacity": 3, "CurrentCapacity": 3}
        ]

        def scaled_in() -> bool:
            v = variant_of(smlocal, "Scaled")
            statuses.add(v["EndpointStatus"])
            return v["EndpointStatus"] == "InService" and v["CurrentInstanceCount"] == 1

        wait_for("scale-in to 1 instance", scaled_in, 60)
        timeline.append((time.monotonic() - t0, "1 instance InService"))
        assert alarm_state(low["AlarmName"]) == "ALARM" and alarm_state(high["AlarmName"]) == "OK"
        assert "Updating" in statuses  # scaling acts through UpdateEndpointWeightsAndCapacities

        activities = aas.describe_scaling_activities(ServiceNamespace=NS, ResourceId=rid)["ScalingActivities"]
        assert [a["Description"] for a in activities] == [
            "Setting desired instance count to 1.",
            "Setting desired instance count to 3.",
        ]
        scale_in, scale_out = activities
        for activity, alarm in ((scale_out, put["Alarms"][0]), (scale_in, put["Alarms"][1])):
            assert activity["StatusCode"] == "Successful", activity
            assert activity["Cause"] == (
                f"monitor alarm {alarm['AlarmName']} in state ALARM triggered policy per-instance"
            )
            assert activity["ResourceId"] == rid and activity["ScalableDimension"] == DIM
            assert activity["EndTime"] >= activity["StartTime"]
        assert scale_in["StatusMessage"] == (
            "Successfully set desired instance count to 1. Change successfully fulfilled by sagemaker."
        )
        for t, event in timeline:
            print(f"autoscaling timeline: +{t:5.1f} s {event}")
        for a in reversed(activities):
            start = (a["StartTime"] - scale_out["StartTime"]).total_seconds()
            took = (a["EndTime"] - a["StartTime"]).total_seconds()
            print(f"autoscaling activity: +{start:5.1f} s {a['Description']} took {took:.2f} s")
    finally:
        smlocal.cleanup("Scaled")
    # DeleteEndpoint deregistered the target and its policy
    assert aas.describe_scalable_targets(ServiceNamespace=NS, ResourceIds=[rid])["ScalableTargets"] == []
    assert aas.describe_scaling_policies(ServiceNamespace=NS, ResourceId=rid)["ScalingPolicies"] == []


def test_minimum_capacity_above_the_current_count_scales_out_at_once(smlocal: Smlocal, aas: Any) -> None:
    smlocal.deploy("Floor", count=1)
    rid = resource("Floor")
    try:
        aas.register_scalable_target(**variant_target(rid), MinCapacity=2, MaxCapacity=4)
        wait_for(
            "2 instances",
            lambda: (
                (v := variant_of(smlocal, "Floor"))["CurrentInstanceCount"] == 2
                and v["EndpointStatus"] == "InService"
            ),
            30,
        )
        activity = wait_for(
            "the activity to end",
            lambda: [
                a
                for a in aas.describe_scaling_activities(ServiceNamespace=NS, ResourceId=rid)[
                    "ScalingActivities"
                ]
                if a["StatusCode"] != "InProgress"
            ],
            10,
        )[0]
        assert activity["Description"] == "Setting desired instance count to 2."
        assert activity["Cause"] == "minimum capacity was set to 2"
        assert activity["StatusCode"] == "Successful"
        target = aas.describe_scalable_targets(ServiceNamespace=NS, ResourceIds=[rid])["ScalableTargets"][0]
        assert (target["MinCapacity"], target["MaxCapacity"]) == (2, 4)
        assert target["RoleARN"] == (
            "arn:aws:iam::123456789012:role/aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
            "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"
        )
        aas.deregister_scalable_target(**variant_target(rid))
        assert aas.describe_scalable_targets(ServiceNamespace=NS)["ScalableTargets"] == []
    finally:
        smlocal.cleanup("Floor")


def test_policies_are_described_updated_paged_and_deleted(smlocal: Smlocal, aas: Any) -> None:
    smlocal.deploy("Policies", count=1)
    rid = resource("Policies")
    try:
        aas.register_scalable_target(**variant_target(rid), MinCapacity=1, MaxCapacity=2)
        custom = {
            "MetricName": "CPUUtilization",
            "Namespace": "/aws/sagemaker/Endpoints",
            "Dimensions": [
                {"Name": "EndpointName", "Value": "Policies"},
                {"Name": "VariantName", "Value": "AllTraffic"},
            ],
            "Statistic": "Average",
            "Unit": "Percent",
        }
        aas.put_scaling_policy(
            PolicyName="cpu",
            **variant_target(rid),
            PolicyType="TargetTrackingScaling",
            TargetTrackingScalingPolicyConfiguration={
                "TargetValue": 75.0,
                "CustomizedMetricSpecification": custom,
            },
        )
        step = {
            "AdjustmentType": "ChangeInCapacity",
            "StepAdjustments": [{"MetricIntervalLowerBound": 0.0, "ScalingAdjustment": 1}],
            "Cooldown": 120,
        }
        put = aas.put_scaling_policy(
            PolicyName="step",
            **variant_target(rid),
            PolicyType="StepScaling",
            StepScalingPolicyConfiguration=step,
        )
        assert put["Alarms"] == []
        assert put["PolicyARN"].endswith(f":resource/sagemaker/{rid}:policyName/step")
        first = aas.describe_scaling_policies(ServiceNamespace=NS, ResourceId=rid, MaxResults=1)
        assert [p["PolicyName"] for p in first["ScalingPolicies"]] == ["cpu"] and first["NextToken"]
        pages = aas.get_paginator("describe_scaling_policies").paginate(
            ServiceNamespace=NS, ResourceId=rid, PaginationConfig={"PageSize": 1}
        )
        policies = [p for page in pages for p in page["ScalingPolicies"]]
        assert [p["PolicyName"] for p in policies] == ["cpu", "step"]
        assert policies[0]["TargetTrackingScalingPolicyConfiguration"] == {
            "TargetValue": 75.0,
            "CustomizedMetricSpecification": custom,
        }
        assert policies[1]["StepScalingPolicyConfiguration"] == step
        # PutScalingPolicy on an existing name updates it in place (same ARN)
        again = aas.put_scaling_policy(
            PolicyName="cpu",
            **variant_target(rid),
            PolicyType="TargetTrackingScaling",
            TargetTrackingScalingPolicyConfiguration={
                "TargetValue": 50.0,
                "CustomizedMetricSpecification": custom,
            },
        )
        assert again["PolicyARN"] == policies[0]["PolicyARN"]
        cpu = aas.describe_scaling_policies(ServiceNamespace=NS, PolicyNames=["cpu"])["ScalingPolicies"]
        assert cpu[0]["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == 50.0
        aas.delete_scaling_policy(PolicyName="cpu", **variant_target(rid))
        left = aas.describe_scaling_policies(ServiceNamespace=NS, ResourceId=rid)["ScalingPolicies"]
        assert [p["PolicyName"] for p in left] == ["step"]
        # deregistering the target deletes its policies
        aas.deregister_scalable_target(**variant_target(rid))
        assert aas.describe_scaling_policies(ServiceNamespace=NS, ResourceId=rid)["ScalingPolicies"] == []
    finally:
        smlocal.cleanup("Policies")


def test_errors_are_aws_shaped(smlocal: Smlocal, aas: Any) -> None:
    smlocal.deploy("Errors", count=1)
    rid = resource("Errors")
    target = f"service namespace: sagemaker, resource ID: {rid}, scalable dimension: {DIM}"
    tracking = {"TargetValue": 10.0, "PredefinedMetricSpecification": PER_INSTANCE}
    try:
        cases: list[tuple[str, dict[str, Any], tuple[str, int, str]]] = [
            (
                "put_scaling_policy",
                dict(
                    PolicyName="p",
                    **variant_target(rid),
                    PolicyType="TargetTrackingScaling",
                    TargetTrackingScalingPolicyConfiguration=tracking,
                ),
                ("ObjectNotFoundException", 400, f"No scalable target registered for {target}"),
            ),
            (
                "deregister_scalable_target",
                dict(**variant_target(rid)),
                ("ObjectNotFoundException", 400, f"No scalable target registered for {target}"),
            ),
            (
                "register_scalable_target",
                dict(**variant_target(rid), MinCapacity=3, MaxCapacity=2),
                ("ValidationException", 400, "Minimum capacity cannot be greater than maximum capacity"),
            ),
            (
                "register_scalable_target",
                dict(**variant_target(rid)),
                (
                    "ValidationException",
                    400,
                    "MinCapacity and MaxCapacity are required for registering a new scalable target",
                ),
            ),
            (
                "register_scalable_target",
                dict(
                    ServiceNamespace=NS,
                    ResourceId=resource("Nowhere"),
                    ScalableDimension=DIM,
                    MinCapacity=1,
                    MaxCapacity=2,
                ),
                ("ValidationException", 400, "The endpoint Nowhere does not exist."),
            ),
            (
                "register_scalable_target",
                dict(
                    ServiceNamespace=NS,
                    ResourceId=resource("Errors", "Other"),
                    ScalableDimension=DIM,
                    MinCapacity=1,
                    MaxCapacity=2,
                ),
                ("ValidationException", 400, "The variant Other does not exist in endpoint Errors."),
            ),
            (
                "register_scalable_target",
                dict(
                    ServiceNamespace="ecs",
                    ResourceId="service/default/web",
                    ScalableDimension="ecs:service:DesiredCount",
                    MinCapacity=1,
                    MaxCapacity=2,
                ),
                (
                    "ValidationException",
                    400,
                    "Unsupported service namespace, resource type or scalable dimension. smlocal scales the "
                    "sagemaker namespace's endpoint/{EndpointName}/variant/{VariantName} resources in the "
                    "sagemaker:variant:DesiredInstanceCount dimension (and serverless variants in "
                    "sagemaker:variant:DesiredProvisionedConcurrency).",
                ),
            ),
            (
                "register_scalable_target",
                dict(ServiceNamespace="nope", ResourceId=rid, ScalableDimension=DIM),
                (
                    "ValidationException",
                    400,
                    "1 validation error detected: Value 'nope' at 'serviceNamespace' failed to satisfy "
                    "constraint: Member must satisfy enum value set: [",
                ),
            ),
        ]
        for operation, params, (code, status, message) in cases:
            with pytest.raises(ClientError) as exc:
                getattr(aas, operation)(**params)
            got = error_of(exc)
            assert got[:2] == (code, status), (operation, params, got)
            assert got[2].startswith(message) if message.endswith("[") else got[2] == message, got

        aas.register_scalable_target(**variant_target(rid), MinCapacity=1, MaxCapacity=2)
        policy_errors: list[tuple[dict[str, Any], tuple[str, int, str]]] = [
            (
                {
                    "TargetValue": 1.0,
                    "PredefinedMetricSpecification": {"PredefinedMetricType": "ALBRequestCountPerTarget"},
                },
                (
                    "ValidationException",
                    400,
                    f"Scalable dimension {DIM} only supports the following predefined metric types: "
                    "SageMakerVariantInvocationsPerInstance",
                ),
            ),
            (
                {
                    "TargetValue": 1.0,
                    "CustomizedMetricSpecification": {
                        "MetricName": "CPUReservation",
                        "Namespace": "/aws/sagemaker/Endpoints",
                        "Dimensions": [
                            {"Name": "EndpointName", "Value": "Errors"},
                            {"Name": "VariantName", "Value": "AllTraffic"},
                        ],
                        "Statistic": "Average",
                    },
                },
                (
                    "ValidationException",
                    400,
                    "smlocal publishes no metric /aws/sagemaker/Endpoints/CPUReservation",
                ),
            ),
        ]
        for config, (code, status, message) in policy_errors:
            with pytest.raises(ClientError) as exc:
                aas.put_scaling_policy(
                    PolicyName="p",
                    **variant_target(rid),
                    PolicyType="TargetTrackingScaling",
                    TargetTrackingScalingPolicyConfiguration=config,
                )
            got = error_of(exc)
            assert got[:2] == (code, status) and got[2].startswith(message), got
        with pytest.raises(ClientError) as exc:
            aas.put_scaling_policy(
                PolicyName="p",
                **variant_target(rid),
                PolicyType="TargetTrackingScaling",
                TargetTrackingScalingPolicyConfiguration={
                    "TargetValue": 0.0,
                    "PredefinedMetricSpecification": PER_INSTANCE,
                },
            )
        assert error_of(exc) == ("ValidationException", 400, "TargetValue must be greater than 0, not 0.0.")
        step_errors = [
            ([], "StepScalingPolicyConfiguration needs at least one StepAdjustment."),
            (
                [
                    {
                        "MetricIntervalLowerBound": 0.0,
                        "MetricIntervalUpperBound": 10.0,
                        "ScalingAdjustment": 1,
                    },
                    {"MetricIntervalLowerBound": 5.0, "ScalingAdjustment": 2},
                ],
                "The intervals of the StepAdjustments must not overlap or leave a gap.",
            ),
            (
                [
                    {
                        "MetricIntervalLowerBound": 10.0,
                        "MetricIntervalUpperBound": 10.0,
                        "ScalingAdjustment": 1,
                    }
                ],
                "A StepAdjustment's MetricIntervalLowerBound must be below its upper bound.",
            ),
        ]
        for steps, message in step_errors:
            with pytest.raises(ClientError) as exc:
                aas.put_scaling_policy(
                    PolicyName="p",
                    **variant_target(rid),
                    PolicyType="StepScaling",
                    StepScalingPolicyConfiguration={
                        "AdjustmentType": "ChangeInCapacity",
                        "StepAdjustments": steps,
                    },
                )
            assert error_of(exc) == ("ValidationException", 400, message)
        with pytest.raises(ClientError) as exc:
            aas.delete_scaling_policy(PolicyName="p", **variant_target(rid))
        assert error_of(exc) == (
            "ObjectNotFoundException",
            400,
            f"No scaling policy found for {target}, policy name: p",
        )
        with pytest.raises(ClientError) as exc:
            aas.put_scheduled_action(
                ServiceNamespace=NS, ScheduledActionName="nightly", ResourceId=rid, ScalableDimension=DIM
            )
        code, status, message = error_of(exc)
        assert (code, status) == ("NotImplemented", 501) and "PutScheduledAction" in message
        # an update under way: registering is refused with the spec's text
        smlocal.sm.update_endpoint_weights_and_capacities(
            EndpointName="Errors",
            DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 2}],
        )
        with pytest.raises(ClientError) as exc:
            aas.register_scalable_target(**variant_target(rid), MinCapacity=1, MaxCapacity=3)
        assert error_of(exc) == (
            "ValidationException",
            400,
            "Endpoint Errors is in Updating status. "
            "The status should be in 'InService' to register it as a scalable target.",
        )
    finally:
        smlocal.cleanup("Errors")


def test_capacity_changes_and_scaling_state_survive_a_restart(
    tmp_path: Path, echo_image: str, aws_credentials: None
) -> None:
    """A changed instance count (autoscaling acts through it) is re-launched after a restart, with
    SystemUpdating while the containers are adopted; targets, policies and activities are kept."""
    first = start_smlocal(tmp_path, echo_image, stop_containers=False, time_scale=TIME_SCALE)  # a crash
    client = boto3.client("application-autoscaling", endpoint_url=first.server.url, **CREDENTIALS)
    rid = resource("Kept")
    try:
        first.deploy("Kept", count=1)
        client.register_scalable_target(**variant_target(rid), MinCapacity=2, MaxCapacity=3)
        client.put_scaling_policy(
            PolicyName="per-instance",
            **variant_target(rid),
            PolicyType="TargetTrackingScaling",
            TargetTrackingScalingPolicyConfiguration={
                "TargetValue": 1000.0,
                "PredefinedMetricSpecification": PER_INSTANCE,
            },
        )
        wait_for(
            "the minimum capacity",
            lambda: (
                (v := variant_of(first, "Kept"))["CurrentInstanceCount"] == 2
                and v["EndpointStatus"] == "InService"
            ),
            30,
        )
    finally:
        first.server.stop()

    restarted = start_smlocal(tmp_path, echo_image, time_scale=TIME_SCALE)
    client = boto3.client("application-autoscaling", endpoint_url=restarted.server.url, **CREDENTIALS)
    try:
        assert restarted.sm.describe_endpoint(EndpointName="Kept")["EndpointStatus"] in (
            "SystemUpdating",
            "InService",
        )
        described = restarted.wait("Kept")
        assert described["EndpointStatus"] == "InService"
        variant = described["ProductionVariants"][0]
        assert (variant["CurrentInstanceCount"], variant["DesiredInstanceCount"]) == (2, 2)
        config = restarted.sm.describe_endpoint_config(EndpointConfigName="Kept")
        assert config["ProductionVariants"][0]["InitialInstanceCount"] == 1  # the config is unchanged
        targets = client.describe_scalable_targets(ServiceNamespace=NS)["ScalableTargets"]
        assert [(t["ResourceId"], t["MinCapacity"], t["MaxCapacity"]) for t in targets] == [(rid, 2, 3)]
        policies = client.describe_scaling_policies(ServiceNamespace=NS)["ScalingPolicies"]
        assert [p["PolicyName"] for p in policies] == ["per-instance"]
        activities = client.describe_scaling_activities(ServiceNamespace=NS)["ScalingActivities"]
        assert [(a["Cause"], a["StatusCode"]) for a in activities] == [
            ("minimum capacity was set to 2", "Successful")
        ]
    finally:
        restarted.cleanup("Kept")
        restarted.server.stop()


def test_scalable_targets_are_tagged_by_arn(smlocal: Smlocal, aas: Any) -> None:
    smlocal.deploy("Tagged", count=1)
    rid = resource("Tagged")
    try:
        arn = aas.register_scalable_target(
            **variant_target(rid),
            MinCapacity=1,
            MaxCapacity=2,
            Tags={"team": "ml"},
        )["ScalableTargetARN"]
        assert aas.list_tags_for_resource(ResourceARN=arn)["Tags"] == {"team": "ml"}
        aas.tag_resource(ResourceARN=arn, Tags={"env": "ci", "team": "search"})
        assert aas.list_tags_for_resource(ResourceARN=arn)["Tags"] == {"env": "ci", "team": "search"}
        aas.untag_resource(ResourceARN=arn, TagKeys=["team"])
        assert aas.list_tags_for_resource(ResourceARN=arn)["Tags"] == {"env": "ci"}
        with pytest.raises(ClientError) as exc:
            aas.tag_resource(ResourceARN=arn, Tags={f"k{i}": "v" for i in range(50)})
        assert error_of(exc) == (
            "TooManyTagsException",
            400,
            f"The resource {arn} would have more than 50 tags.",
        )
        missing = arn[:-4] + "0000"
        with pytest.raises(ClientError) as exc:
            aas.list_tags_for_resource(ResourceARN=missing)
        assert error_of(exc) == (
            "ResourceNotFoundException",
            400,
            f"No scalable target found for the resource ARN {missing}",
        )
    finally:
        smlocal.cleanup("Tagged")


def test_suspended_scale_out_holds_until_resumed(smlocal: Smlocal, aas: Any) -> None:
    smlocal.deploy("Suspended", count=1)
    rid = resource("Suspended")
    try:
        aas.register_scalable_target(
            **variant_target(rid),
            MinCapacity=1,
            MaxCapacity=2,
            SuspendedState={"DynamicScalingOutSuspended": True},
        )
        aas.put_scaling_policy(
            PolicyName="per-instance",
            **variant_target(rid),
            PolicyType="TargetTrackingScaling",
            TargetTrackingScalingPolicyConfiguration={
                "TargetValue": 20.0,
                "PredefinedMetricSpecification": PER_INSTANCE,
                "ScaleOutCooldown": 60,
            },
        )
        with Load(smlocal, "Suspended", rate=100.0) as load:
            # five periods of 5x the target: the alarm holds, but scaling out is suspended
            wait_for("five periods of load", lambda: load.sent >= 500, 30)
            assert (
                aas.describe_scaling_activities(ServiceNamespace=NS, ResourceId=rid)["ScalingActivities"]
                == []
            )
            assert variant_of(smlocal, "Suspended")["DesiredInstanceCount"] == 1
            aas.register_scalable_target(
                **variant_target(rid),
                SuspendedState={"DynamicScalingOutSuspended": False},
            )
            wait_for(
                "the scale-out once resumed",
                lambda: (
                    (v := variant_of(smlocal, "Suspended"))["CurrentInstanceCount"] == 2
                    and v["EndpointStatus"] == "InService"
                ),
                15,
            )
        target = aas.describe_scalable_targets(ServiceNamespace=NS, ResourceIds=[rid])["ScalableTargets"][0]
        assert (target["MinCapacity"], target["MaxCapacity"]) == (1, 2)  # unchanged by the second call
        assert target["SuspendedState"]["DynamicScalingOutSuspended"] is False
    finally:
        smlocal.cleanup("Suspended")
