"""UpdateEndpoint's DeploymentConfig against real echo containers under continuous load: canary
traffic shifting with baking, linear steps, rolling batches, and automatic rollback (execution
timeout, failed batch). The server runs with --time-scale 60: deployment waits of 60 s last 1 s."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from tests.fixtures.scaling import time_scaled_server
from tests.fixtures.smlocal_server import CREDENTIALS, Smlocal

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def smlocal(
    tmp_path_factory: pytest.TempPathFactory, echo_image: str, s3_server: str, aws_credentials: None
) -> Iterator[Smlocal]:
    yield from time_scaled_server(tmp_path_factory.mktemp("smlocal"), echo_image, s3_server)


class Load(threading.Thread):
    """Invokes continuously, asking each instance for its COLOR; records (time, answer) and failures."""

    def __init__(self, smlocal: Smlocal, endpoint: str) -> None:
        super().__init__(daemon=True)
        config = Config(retries={"mode": "standard", "max_attempts": 1})
        self.rt = boto3.client(
            "sagemaker-runtime", endpoint_url=smlocal.server.url, config=config, **CREDENTIALS
        )
        self.endpoint = endpoint
        self.stop = threading.Event()
        self.answers: list[tuple[float, str]] = []
        self.failures: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                reply = self.rt.invoke_endpoint(
                    EndpointName=self.endpoint, Body=b"x", CustomAttributes="env=COLOR"
                )
                self.answers.append((time.monotonic(), reply["Body"].read().decode()))
            except Exception as exc:  # noqa: BLE001 - every failure is what the test counts
                self.failures.append(repr(exc))
            self.stop.wait(0.005)

    def __enter__(self) -> Load:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.join(timeout=30)
        self.rt.close()


def colored(
    smlocal: Smlocal, name: str, color: str, count: int = 2, env: dict[str, str] | None = None
) -> str:
    """A model and an endpoint config whose instances answer `color`."""
    model = f"{name}-{color}"
    smlocal.sm.create_model(
        ModelName=model,
        PrimaryContainer={"Image": smlocal.image, "Environment": {"COLOR": color, **(env or {})}},
    )
    smlocal.sm.create_endpoint_config(
        EndpointConfigName=model,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": model,
                "InitialInstanceCount": count,
                "InstanceType": "ml.m5.large",
            }
        ],
    )
    return model


def observe(
    smlocal: Smlocal, name: str, timeout_s: float = 60.0
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Poll DescribeEndpoint until the update is over; every answer seen on the way."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while True:
        described: dict[str, Any] = smlocal.sm.describe_endpoint(EndpointName=name)
        seen.append(described)
        if described["EndpointStatus"] not in ("Updating", "RollingBack") or time.monotonic() > deadline:
            return described, seen
        time.sleep(0.05)


def stages(seen: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The distinct (Status, StatusMessage) of the pending deployment's variant, in order."""
    out: list[tuple[str, str]] = []
    for d in seen:
        for v in d.get("PendingDeploymentSummary", {}).get("ProductionVariants", []):
            for s in v.get("VariantStatus", []):
                if (s["Status"], s["StatusMessage"]) not in out:
                    out.append((s["Status"], s["StatusMessage"]))
    return out


def cleanup(smlocal: Smlocal, name: str, *configs: str) -> None:
    smlocal.cleanup(name)
    for c in configs:
        for call, key in (
            (smlocal.sm.delete_endpoint_config, "EndpointConfigName"),
            (smlocal.sm.delete_model, "ModelName"),
        ):
            try:
                call(**{key: c})
            except smlocal.sm.exceptions.ClientError:
                pass


def test_canary_shifts_part_of_the_traffic_bakes_and_completes(smlocal: Smlocal) -> None:
    blue, green = colored(smlocal, "Canary", "blue"), colored(smlocal, "Canary", "green")
    smlocal.sm.create_endpoint(EndpointName="Canary", EndpointConfigName=blue)
    try:
        assert smlocal.wait("Canary")["EndpointStatus"] == "InService"
        deployment = {
            "BlueGreenUpdatePolicy": {
                "TrafficRoutingConfiguration": {
                    "Type": "CANARY",
                    "WaitIntervalInSeconds": 120,  # 2 s at --time-scale 60
                    "CanarySize": {"Type": "INSTANCE_COUNT", "Value": 1},
                },
                "TerminationWaitInSeconds": 60,
            }
        }
        with Load(smlocal, "Canary") as load:
            started = time.monotonic()
            smlocal.sm.update_endpoint(
                EndpointName="Canary", EndpointConfigName=green, DeploymentConfig=deployment
            )
            done, seen = observe(smlocal, "Canary")
            ended = time.monotonic()
            time.sleep(0.2)  # a few answers after the update (not synchronisation: more evidence)
        assert load.failures == []
        assert done["EndpointStatus"] == "InService" and done["EndpointConfigName"] == green
        assert done["LastDeploymentConfig"] == deployment
        assert stages(seen) == [
            ("Creating", "Launching 2 instance(s)."),
            ("ActivatingTraffic", "Activating traffic on canary capacity of 1 instance(s)."),
            (
                "Baking",
                "Baking for 60 seconds (TerminationWaitInSeconds) with traffic enabled on full capacity of 2 instance(s).",
            ),
        ]
        during = [c for t, c in load.answers if started < t < ended]
        # the canary phase served both fleets; afterwards only the green one
        assert {"blue", "green"} <= set(during)
        assert {c for t, c in load.answers if t > ended} == {"green"}
        print(f"canary update: {ended - started:.1f} s, {len(during)} requests during it, 0 failed")
    finally:
        cleanup(smlocal, "Canary", blue, green)


def test_linear_steps_then_all_traffic(smlocal: Smlocal) -> None:
    blue, green = colored(smlocal, "Linear", "blue", count=2), colored(smlocal, "Linear", "green", count=2)
    smlocal.sm.create_endpoint(EndpointName="Linear", EndpointConfigName=blue)
    try:
        assert smlocal.wait("Linear")["EndpointStatus"] == "InService"
        deployment = {
            "BlueGreenUpdatePolicy": {
                "TrafficRoutingConfiguration": {
                    "Type": "LINEAR",
                    "WaitIntervalInSeconds": 60,
                    "LinearStepSize": {"Type": "CAPACITY_PERCENT", "Value": 50},
                }
            }
        }
        with Load(smlocal, "Linear") as load:
            smlocal.sm.update_endpoint(
                EndpointName="Linear", EndpointConfigName=green, DeploymentConfig=deployment
            )
            done, seen = observe(smlocal, "Linear")
        assert load.failures == []
        assert done["EndpointConfigName"] == green
        assert ("ActivatingTraffic", "Activating traffic on canary capacity of 1 instance(s).") in stages(
            seen
        )
    finally:
        cleanup(smlocal, "Linear", blue, green)


def test_execution_timeout_rolls_back_to_the_old_fleet(smlocal: Smlocal) -> None:
    blue, green = colored(smlocal, "Timeout", "blue"), colored(smlocal, "Timeout", "green")
    smlocal.sm.create_endpoint(EndpointName="Timeout", EndpointConfigName=blue)
    try:
        assert smlocal.wait("Timeout")["EndpointStatus"] == "InService"
        deployment = {
            "BlueGreenUpdatePolicy": {
                "TrafficRoutingConfiguration": {
                    "Type": "CANARY",
                    "WaitIntervalInSeconds": 3600,  # 60 s: longer than the timeout
                    "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 50},
                },
                "MaximumExecutionTimeoutInSeconds": 600,  # 10 s at --time-scale 60
            }
        }
        with Load(smlocal, "Timeout") as load:
            smlocal.sm.update_endpoint(
                EndpointName="Timeout", EndpointConfigName=green, DeploymentConfig=deployment
            )
            done, seen = observe(smlocal, "Timeout")
            ended = time.monotonic()
            time.sleep(0.2)
        assert load.failures == []
        assert "RollingBack" in {d["EndpointStatus"] for d in seen}
        assert done["EndpointStatus"] == "InService" and done["EndpointConfigName"] == blue
        assert done["FailureReason"] == (
            "The update was rolled back because the deployment exceeded MaximumExecutionTimeoutInSeconds "
            "(600 s). The endpoint serves its previous configuration."
        )
        assert {c for t, c in load.answers if t > ended} == {"blue"}
    finally:
        cleanup(smlocal, "Timeout", blue, green)


def test_rolling_update_replaces_instances_in_batches(smlocal: Smlocal) -> None:
    blue, green = colored(smlocal, "Rolling", "blue"), colored(smlocal, "Rolling", "green")
    smlocal.sm.create_endpoint(EndpointName="Rolling", EndpointConfigName=blue)
    try:
        assert smlocal.wait("Rolling")["EndpointStatus"] == "InService"
        deployment = {
            "RollingUpdatePolicy": {
                "MaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 1},
                "WaitIntervalInSeconds": 60,
            }
        }
        with Load(smlocal, "Rolling") as load:
            smlocal.sm.update_endpoint(
                EndpointName="Rolling", EndpointConfigName=green, DeploymentConfig=deployment
            )
            done, seen = observe(smlocal, "Rolling")
        assert load.failures == []
        assert done["EndpointStatus"] == "InService" and done["EndpointConfigName"] == green
        assert done["ProductionVariants"][0]["CurrentInstanceCount"] == 2
        assert stages(seen)[1:] == [
            ("Updating", "Rolling AllTraffic: 1 new, 1 old instance(s) serve."),
            ("Updating", "Rolling AllTraffic: 2 new, 0 old instance(s) serve."),
        ]
        colors = [c for _, c in load.answers]
        assert colors[0] == "blue" and colors[-1] == "green" and "green" in colors
    finally:
        cleanup(smlocal, "Rolling", blue, green)


def test_a_failed_rolling_batch_rolls_back(smlocal: Smlocal) -> None:
    blue = colored(smlocal, "BadRoll", "blue")
    broken = colored(smlocal, "BadRoll", "broken", env={"EXIT_AT_START": "3"})
    smlocal.sm.create_endpoint(EndpointName="BadRoll", EndpointConfigName=blue)
    try:
        assert smlocal.wait("BadRoll")["EndpointStatus"] == "InService"
        deployment = {
            "RollingUpdatePolicy": {
                "MaximumBatchSize": {"Type": "CAPACITY_PERCENT", "Value": 50},
                "WaitIntervalInSeconds": 0,
            }
        }
        with Load(smlocal, "BadRoll") as load:
            smlocal.sm.update_endpoint(
                EndpointName="BadRoll", EndpointConfigName=broken, DeploymentConfig=deployment
            )
            done, _ = observe(smlocal, "BadRoll")
        assert load.failures == []
        assert done["EndpointStatus"] == "InService" and done["EndpointConfigName"] == blue
        assert done["FailureReason"].startswith(
            "The update was rolled back because a new instance of variant AllTraffic failed: CannotStartContainerError."
        )
        assert done["ProductionVariants"][0]["CurrentInstanceCount"] == 2
        assert {c for _, c in load.answers} == {"blue"}
    finally:
        cleanup(smlocal, "BadRoll", blue, broken)


def test_rolling_needs_the_same_variants(smlocal: Smlocal) -> None:
    blue = colored(smlocal, "Renamed", "blue", count=1)
    smlocal.sm.create_model(ModelName="Renamed-other", PrimaryContainer={"Image": smlocal.image})
    smlocal.sm.create_endpoint_config(
        EndpointConfigName="Renamed-other",
        ProductionVariants=[
            {
                "VariantName": "Other",
                "ModelName": "Renamed-other",
                "InitialInstanceCount": 1,
                "InstanceType": "ml.m5.large",
            }
        ],
    )
    smlocal.sm.create_endpoint(EndpointName="Renamed", EndpointConfigName=blue)
    try:
        assert smlocal.wait("Renamed")["EndpointStatus"] == "InService"
        with pytest.raises(smlocal.sm.exceptions.ClientError) as exc:
            smlocal.sm.update_endpoint(
                EndpointName="Renamed",
                EndpointConfigName="Renamed-other",
                DeploymentConfig={
                    "RollingUpdatePolicy": {
                        "MaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 1},
                        "WaitIntervalInSeconds": 0,
                    }
                },
            )
        error = exc.value.response["Error"]
        assert error["Code"] == "ValidationException"
        assert error["Message"].startswith(
            "A RollingUpdatePolicy replaces the instances of existing variants"
        )
        assert smlocal.sm.describe_endpoint(EndpointName="Renamed")["EndpointStatus"] == "InService"
    finally:
        cleanup(smlocal, "Renamed", blue, "Renamed-other")


def test_a_rollback_alarm_in_alarm_during_the_canary_rolls_back(smlocal: Smlocal) -> None:
    """The green model lacks COLOR: the canary's answers are 4xx ModelErrors; a CloudWatch alarm on
    Invocation4XXErrors (unchanged boto3 cloudwatch client) goes to ALARM and the deployment rolls back."""
    blue = colored(smlocal, "Guarded", "blue")
    smlocal.sm.create_model(ModelName="Guarded-bad", PrimaryContainer={"Image": smlocal.image})
    smlocal.sm.create_endpoint_config(
        EndpointConfigName="Guarded-bad",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "Guarded-bad",
                "InitialInstanceCount": 2,
                "InstanceType": "ml.m5.large",
            }
        ],
    )
    cw = boto3.client("cloudwatch", endpoint_url=smlocal.server.url, **CREDENTIALS)
    cw.put_metric_alarm(
        AlarmName="guarded-4xx",
        Namespace="AWS/SageMaker",
        MetricName="Invocation4XXErrors",
        Dimensions=[
            {"Name": "EndpointName", "Value": "Guarded"},
            {"Name": "VariantName", "Value": "AllTraffic"},
        ],
        Statistic="Sum",
        Period=60,
        EvaluationPeriods=1,
        Threshold=0.0,
        ComparisonOperator="GreaterThanThreshold",
        TreatMissingData="notBreaching",
    )
    smlocal.sm.create_endpoint(EndpointName="Guarded", EndpointConfigName=blue)
    try:
        assert smlocal.wait("Guarded")["EndpointStatus"] == "InService"
        deployment = {
            "BlueGreenUpdatePolicy": {
                "TrafficRoutingConfiguration": {
                    "Type": "CANARY",
                    "WaitIntervalInSeconds": 1200,  # 20 s: the alarm fires well before
                    "CanarySize": {"Type": "INSTANCE_COUNT", "Value": 1},
                }
            },
            "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": "guarded-4xx"}]},
        }
        with Load(smlocal, "Guarded") as load:
            started = time.monotonic()
            smlocal.sm.update_endpoint(
                EndpointName="Guarded", EndpointConfigName="Guarded-bad", DeploymentConfig=deployment
            )
            done, seen = observe(smlocal, "Guarded")
            ended = time.monotonic()
            time.sleep(0.2)
        assert "RollingBack" in {d["EndpointStatus"] for d in seen}
        assert done["EndpointStatus"] == "InService" and done["EndpointConfigName"] == blue
        assert done["FailureReason"] == (
            "The update was rolled back because alarm guarded-4xx went into ALARM state. "
            "The endpoint serves its previous configuration."
        )
        assert load.failures and all("ModelError" in f for f in load.failures)  # the canary's answers
        assert {c for t, c in load.answers if t > ended} == {"blue"}
        assert cw.describe_alarms(AlarmNames=["guarded-4xx"])["MetricAlarms"][0]["StateValue"] == "ALARM"
        print(f"alarm rollback: {ended - started:.1f} s from UpdateEndpoint to InService on the old config")
    finally:
        cw.delete_alarms(AlarmNames=["guarded-4xx"])
        cleanup(smlocal, "Guarded", blue, "Guarded-bad")


def pipeline(smlocal: Smlocal, image: str, name: str, color: str) -> str:
    """A Serial model of two containers tagging the body `{color}1`, `{color}2`, on two instances."""
    model = f"{name}-{color}"
    smlocal.sm.create_model(
        ModelName=model,
        Containers=[{"Image": image, "Environment": {"STAGE": f"{color}{i}"}} for i in (1, 2)],
    )
    smlocal.sm.create_endpoint_config(
        EndpointConfigName=model,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": model,
                "InitialInstanceCount": 2,
                "InstanceType": "ml.m5.large",
            }
        ],
    )
    return model


def test_a_rolling_update_of_a_pipeline_replaces_whole_instances(
    smlocal: Smlocal, echo_bind_image: str
) -> None:
    """Every answer comes from one generation's containers (both tags blue or both green): instances
    are replaced whole, batch by batch, with no failed request."""
    blue = pipeline(smlocal, echo_bind_image, "RollPipe", "blue")
    green = pipeline(smlocal, echo_bind_image, "RollPipe", "green")
    smlocal.sm.create_endpoint(EndpointName="RollPipe", EndpointConfigName=blue)
    try:
        assert smlocal.wait("RollPipe")["EndpointStatus"] == "InService"
        deployment = {
            "RollingUpdatePolicy": {
                "MaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 1},
                "WaitIntervalInSeconds": 60,
            }
        }
        with Load(smlocal, "RollPipe") as load:
            smlocal.sm.update_endpoint(
                EndpointName="RollPipe", EndpointConfigName=green, DeploymentConfig=deployment
            )
            done, seen = observe(smlocal, "RollPipe")
            seen_green = len(load.answers)
            while len(load.answers) < seen_green + 3:  # answers after the update, too
                time.sleep(0.01)
        assert load.failures == []
        assert done["EndpointStatus"] == "InService" and done["EndpointConfigName"] == green
        assert stages(seen)[1:] == [
            ("Updating", "Rolling AllTraffic: 1 new, 1 old instance(s) serve."),
            ("Updating", "Rolling AllTraffic: 2 new, 0 old instance(s) serve."),
        ]
        # "x|blue1:...|blue2:..." -> ("blue1", "blue2"): each answer's two tags, of one generation
        tags = {tuple(re.findall(r"\|([a-z]+[12]):", a)) for _, a in load.answers}
        assert tags == {("blue1", "blue2"), ("green1", "green2")}, tags
        answers = [a for _, a in load.answers]
        assert answers[0].startswith("x|blue1:") and answers[-1].startswith("x|green1:")
    finally:
        cleanup(smlocal, "RollPipe", blue, green)
