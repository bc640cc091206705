"""Application Auto Scaling of inference components (DesiredCopyCount) against real echo containers,
through boto3's unchanged clients; the server runs with --time-scale 60 (a policy minute is one second).

AWS's scale-out-from-zero recipe (a step scaling policy invoked by an alarm on
NoCapacityInvocationFailures), target tracking on InvocationsPerCopy under load, and
DeleteInferenceComponent deregistering the component's target."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.fixtures.scaling import NS, TIME_SCALE, time_scaled_server, wait_for
from tests.fixtures.smlocal_server import CREDENTIALS, Smlocal, error_of

pytestmark = pytest.mark.docker

ROLE = "arn:aws:iam::123456789012:role/smlocal"
INSTANCE_TYPE = "ml.m5.large"  # 2 vCPUs: four copies of half a core fit one instance
SMALL = {"NumberOfCpuCoresRequired": 0.5, "MinMemoryRequiredInMb": 512}
COPY_DIM = "sagemaker:inference-component:DesiredCopyCount"


@pytest.fixture(scope="module")
def smlocal(
    tmp_path_factory: pytest.TempPathFactory, echo_image: str, s3_server: str, aws_credentials: None
) -> Iterator[Smlocal]:
    yield from time_scaled_server(tmp_path_factory.mktemp("component-scaling"), echo_image, s3_server)


def _client(smlocal: Smlocal, service: str) -> Any:
    config = Config(retries={"mode": "standard", "max_attempts": 1})
    return boto3.client(service, endpoint_url=smlocal.server.url, config=config, **CREDENTIALS)


@pytest.fixture(scope="module")
def aas(smlocal: Smlocal) -> Any:
    return _client(smlocal, "application-autoscaling")


@pytest.fixture(scope="module")
def cw(smlocal: Smlocal) -> Any:
    return _client(smlocal, "cloudwatch")


def component_target(component: str) -> dict[str, str]:
    """The three members naming a component's scalable target."""
    return {
        "ServiceNamespace": NS,
        "ResourceId": f"inference-component/{component}",
        "ScalableDimension": COPY_DIM,
    }


def deploy_component(smlocal: Smlocal, endpoint: str, component: str, copies: int = 1) -> None:
    """An endpoint for components (a variant without a model) and one echo component on it, InService."""
    smlocal.sm.create_endpoint_config(
        EndpointConfigName=endpoint,
        ExecutionRoleArn=ROLE,
        ProductionVariants=[
            {"VariantName": "AllTraffic", "InstanceType": INSTANCE_TYPE, "InitialInstanceCount": 1}
        ],
    )
    smlocal.sm.create_endpoint(EndpointName=endpoint, EndpointConfigName=endpoint)
    smlocal.wait(endpoint)
    smlocal.sm.create_inference_component(
        InferenceComponentName=component,
        EndpointName=endpoint,
        VariantName="AllTraffic",
        Specification={"ComputeResourceRequirements": SMALL, "Container": {"Image": smlocal.image}},
        RuntimeConfig={"CopyCount": copies},
    )
    wait_copies(smlocal, component, copies)


def described(smlocal: Smlocal, component: str) -> dict[str, Any]:
    found: dict[str, Any] = smlocal.sm.describe_inference_component(InferenceComponentName=component)
    return found


def wait_copies(smlocal: Smlocal, component: str, current: int, timeout_s: float = 60.0) -> dict[str, Any]:
    """Poll until the component is InService with `current` copies."""
    found: dict[str, Any] = wait_for(
        f"{component} InService with {current} copies",
        lambda: (
            d
            if (d := described(smlocal, component))["InferenceComponentStatus"] == "InService"
            and d["RuntimeConfig"]["CurrentCopyCount"] == current
            else None
        ),
        timeout_s,
    )
    return found


def invoke(smlocal: Smlocal, endpoint: str, component: str, body: bytes = b"{}") -> bytes:
    reply = smlocal.rt.invoke_endpoint(
        EndpointName=endpoint, InferenceComponentName=component, Body=body, ContentType="application/json"
    )
    data: bytes = reply["Body"].read()
    return data


def remove(smlocal: Smlocal, endpoint: str, component: str) -> None:
    try:
        smlocal.sm.delete_inference_component(InferenceComponentName=component)
    except ClientError:
        pass
    wait_for(
        f"{component} deleted",
        lambda: (
            not any(
                c["InferenceComponentName"] == component
                for c in smlocal.sm.list_inference_components()["InferenceComponents"]
            )
        ),
        60,
    )
    smlocal.cleanup(endpoint)


def test_scale_out_from_zero_on_no_capacity_alarm(smlocal: Smlocal, aas: Any, cw: Any) -> None:
    """AWS's recipe: copies at 0, a StepScaling policy (+1) on the component's target, and an alarm on
    NoCapacityInvocationFailures (Sum >= 1 over one 60 s period) invoking it; a refused request fires
    the alarm, the policy adds a copy, and a retrying client gets its answer."""
    endpoint, component = "icz-ep", "icz"
    deploy_component(smlocal, endpoint, component)
    target = component_target(component)
    try:
        aas.register_scalable_target(**target, MinCapacity=0, MaxCapacity=2)
        smlocal.sm.update_inference_component_runtime_config(
            InferenceComponentName=component, DesiredRuntimeConfig={"CopyCount": 0}
        )
        wait_copies(smlocal, component, 0)
        policy = aas.put_scaling_policy(
            PolicyName="scale-out-from-zero",
            **target,
            PolicyType="StepScaling",
            StepScalingPolicyConfiguration={
                "AdjustmentType": "ChangeInCapacity",
                "MetricAggregationType": "Maximum",
                # the alarm stays in ALARM while the client retries: the cooldown keeps it at one copy
                "Cooldown": 300,
                "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}],
            },
        )["PolicyARN"]
        alarm = f"{component}-no-capacity"
        cw.put_metric_alarm(
            AlarmName=alarm,
            Namespace="AWS/SageMaker",
            MetricName="NoCapacityInvocationFailures",
            Dimensions=[{"Name": "InferenceComponentName", "Value": component}],
            Statistic="Sum",
            Period=60,
            EvaluationPeriods=1,
            Threshold=1,
            ComparisonOperator="GreaterThanOrEqualToThreshold",
            TreatMissingData="missing",
            AlarmActions=[policy],
        )

        with pytest.raises(ClientError) as refused:
            invoke(smlocal, endpoint, component)
        first_refused = time.monotonic()
        assert error_of(refused) == (
            "ValidationError",
            400,
            f"Inference Component {component} has no capacity to process this request.",
        )

        refusals = 1
        deadline = first_refused + 60
        while True:  # the client retries until a copy answers
            try:
                assert invoke(smlocal, endpoint, component, b"after") == b"after"
                break
            except ClientError as exc:
                assert error_of(exc)[:2] == ("ValidationError", 400)
                refusals += 1
                assert time.monotonic() < deadline, "no copy after 60 s"
                time.sleep(0.2)
        elapsed = time.monotonic() - first_refused
        print(
            f"\nscale-out from zero: {elapsed:.2f} wall s from the first refused request to an answer "
            f"(--time-scale {TIME_SCALE:g}: {elapsed * TIME_SCALE:.0f} policy s; {refusals} refusals)"
        )

        assert described(smlocal, component)["RuntimeConfig"]["DesiredCopyCount"] == 1
        activities = aas.describe_scaling_activities(ServiceNamespace=NS, ResourceId=target["ResourceId"])[
            "ScalingActivities"
        ]
        done = [a for a in activities if a["Description"] == "Setting desired copy count to 1."]
        assert done and done[0]["StatusCode"] == "Successful", activities
        assert (
            f"monitor alarm {alarm} in state ALARM triggered policy scale-out-from-zero" in done[0]["Cause"]
        )

        # the refusals are a CloudWatch metric of the component
        listed = cw.list_metrics(
            Namespace="AWS/SageMaker",
            MetricName="NoCapacityInvocationFailures",
            Dimensions=[{"Name": "InferenceComponentName", "Value": component}],
        )["Metrics"]
        assert len(listed) == 1
        now = time.time()
        stats = cw.get_metric_statistics(
            Namespace="AWS/SageMaker",
            MetricName="NoCapacityInvocationFailures",
            Dimensions=[{"Name": "InferenceComponentName", "Value": component}],
            StartTime=now - 600,
            EndTime=now + 60,
            Period=60,
            Statistics=["Sum"],
        )["Datapoints"]
        assert sum(p["Sum"] for p in stats) == refusals
    finally:
        remove(smlocal, endpoint, component)


class ComponentLoad(threading.Thread):
    """Invokes one component at about `rate` requests per second until stopped; counts failures."""

    def __init__(self, smlocal: Smlocal, endpoint: str, component: str, rate: float) -> None:
        super().__init__(daemon=True)
        self.rt = _client(smlocal, "sagemaker-runtime")
        self.endpoint, self.component = endpoint, component
        self.interval = 1.0 / rate
        self.stop = threading.Event()
        self.failures: list[str] = []

    def run(self) -> None:
        next_at = time.monotonic()
        while not self.stop.is_set():
            try:
                self.rt.invoke_endpoint(
                    EndpointName=self.endpoint, InferenceComponentName=self.component, Body=b"x"
                )
            except ClientError as exc:
                self.failures.append(str(exc))
            next_at += self.interval
            self.stop.wait(max(0.0, next_at - time.monotonic()))


def test_target_tracking_on_invocations_per_copy_and_delete_deregisters(
    smlocal: Smlocal, aas: Any, cw: Any
) -> None:
    endpoint, component = "ict-ep", "ict"
    deploy_component(smlocal, endpoint, component)
    target = component_target(component)
    try:
        aas.register_scalable_target(**target, MinCapacity=1, MaxCapacity=3)
        put = aas.put_scaling_policy(
            PolicyName="per-copy",
            **target,
            PolicyType="TargetTrackingScaling",
            TargetTrackingScalingPolicyConfiguration={
                "TargetValue": 20.0,
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": "SageMakerInferenceComponentInvocationsPerCopy"
                },
                "ScaleOutCooldown": 60,
                "ScaleInCooldown": 600,
            },
        )
        high = cw.describe_alarms(AlarmNames=[put["Alarms"][0]["AlarmName"]])["MetricAlarms"][0]
        assert (high["MetricName"], high["Statistic"], high["Dimensions"]) == (
            "InvocationsPerCopy",
            "Sum",
            [{"Name": "InferenceComponentName", "Value": component}],
        )
        load = ComponentLoad(smlocal, endpoint, component, rate=100.0)  # ~100 per policy minute: 5x
        load.start()
        try:
            wait_for(
                "a scale-out",
                lambda: described(smlocal, component)["RuntimeConfig"]["DesiredCopyCount"] > 1,
                60,
            )
        finally:
            load.stop.set()
            load.join(timeout=30)
        assert not load.failures, load.failures[:3]
        wait_for(
            "the scale-out to finish",
            lambda: any(
                a["StatusCode"] == "Successful"
                and a["Description"].startswith("Setting desired copy count to ")
                for a in aas.describe_scaling_activities(
                    ServiceNamespace=NS, ResourceId=target["ResourceId"]
                )["ScalingActivities"]
            ),
            60,
        )
        # the component's invocation metrics, in ListMetrics
        names = {
            m["MetricName"]
            for m in cw.list_metrics(
                Namespace="AWS/SageMaker", Dimensions=[{"Name": "InferenceComponentName", "Value": component}]
            )["Metrics"]
        }
        assert {"Invocations", "InvocationsPerCopy", "ModelLatency", "OverheadLatency"} <= names, names

        smlocal.sm.delete_inference_component(InferenceComponentName=component)
        assert (
            aas.describe_scalable_targets(ServiceNamespace=NS, ResourceIds=[target["ResourceId"]])[
                "ScalableTargets"
            ]
            == []
        )
        assert (
            aas.describe_scaling_policies(ServiceNamespace=NS, ResourceId=target["ResourceId"])[
                "ScalingPolicies"
            ]
            == []
        )
    finally:
        remove(smlocal, endpoint, component)


def test_refusals_for_components(smlocal: Smlocal, aas: Any) -> None:
    with pytest.raises(ClientError) as missing:
        aas.register_scalable_target(**component_target("ic-none"), MinCapacity=0, MaxCapacity=1)
    assert error_of(missing) == (
        "ValidationException",
        400,
        "The inference component ic-none does not exist.",
    )
    with pytest.raises(ClientError) as wrong:
        aas.register_scalable_target(
            **{**component_target("x"), "ScalableDimension": "sagemaker:variant:DesiredInstanceCount"},
            MinCapacity=0,
            MaxCapacity=1,
        )
    code, status, message = error_of(wrong)
    assert (code, status) == ("ValidationException", 400)
    assert message.startswith("Unsupported resource ID or scalable dimension for an inference component.")
