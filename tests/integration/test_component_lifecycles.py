"""Nothing lost, for an endpoint of inference components: a steady load of real boto3 clients (half
InvokeEndpoint, half InvokeEndpointWithResponseStream, each naming the component) while the component
is updated copy by copy, its copies scaled in and out (to zero and back), the endpoint's instances
added and removed, a copy's container killed, its model deleted, and `smlocal serve` stopped and
killed. Every request must end ok, failed as SageMaker would fail it, or refused while smlocal itself
was down - never failed where SageMaker would have served, crossed, or lost (the accounting of
tests/fixtures/lifecycle/, as test_lifecycles.py does for the other endpoint kinds).

The model is the streaming test image (uvicorn + FastAPI or gunicorn + Flask, its SERVER variable),
which echoes the request's id in CustomAttributes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import docker
import pytest

from emulator.runtime import labels
from tests.fixtures.docker_env import track_owner
from tests.fixtures.lifecycle.events import NOTHING, SERVER_DOWN
from tests.fixtures.lifecycle.kinds import BODY
from tests.fixtures.lifecycle.load import Load, control_client
from tests.fixtures.lifecycle.outcomes import Expected
from tests.fixtures.lifecycle.server import ServeProcess

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ENDPOINT = "life-ic"
COMPONENT = "life-component"
ROLE = "arn:aws:iam::123456789012:role/smlocal"
COMPUTE = {"NumberOfCpuCoresRequired": 0.5, "MinMemoryRequiredInMb": 1024}


def invoke(rt: Any, request_id: str) -> str | None:
    """Even requests InvokeEndpoint, odd ones InvokeEndpointWithResponseStream, both by component."""
    common = {
        "EndpointName": ENDPOINT,
        "InferenceComponentName": COMPONENT,
        "Body": BODY,
        "ContentType": "application/json",
        "CustomAttributes": f"id={request_id}",
    }
    if int(request_id.rsplit("-", 1)[1]) % 2:
        reply = rt.invoke_endpoint_with_response_stream(**common)
        parts = b"".join(e["PayloadPart"]["Bytes"] for e in reply["Body"] if "PayloadPart" in e)
        if parts.count(b"\n") != 2:
            return f"truncated:{parts!r}"
    else:
        reply = rt.invoke_endpoint(**common)
        reply["Body"].read()
    attributes: str | None = reply.get("CustomAttributes")
    return attributes.removeprefix("id=") if attributes else None


@dataclass
class ComponentDeployment:
    server: ServeProcess
    image: str
    engine: docker.DockerClient
    gen: int = 0
    sm: Any = field(init=False)

    def __post_init__(self) -> None:
        self.sm = control_client(self.server.url)

    def spec(self) -> dict[str, Any]:
        stack = "uvicorn" if self.gen % 2 == 0 else "gunicorn"
        model = f"{COMPONENT}-g{self.gen}"
        self.sm.create_model(
            ModelName=model, PrimaryContainer={"Image": self.image, "Environment": {"SERVER": stack}}
        )
        return {"ModelName": model, "ComputeResourceRequirements": COMPUTE}

    def create(self) -> None:
        self.sm.create_endpoint_config(
            EndpointConfigName=ENDPOINT,
            ExecutionRoleArn=ROLE,
            ProductionVariants=[
                {"VariantName": "AllTraffic", "InstanceType": "ml.m5.large", "InitialInstanceCount": 2}
            ],
        )
        self.sm.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName=ENDPOINT)
        self.wait_endpoint()
        self.sm.create_inference_component(
            InferenceComponentName=COMPONENT,
            EndpointName=ENDPOINT,
            VariantName="AllTraffic",
            Specification=self.spec(),
            RuntimeConfig={"CopyCount": 2},
        )
        self.wait_copies(2)

    def wait_endpoint(self, timeout_s: float = 90.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.sm.describe_endpoint(EndpointName=ENDPOINT)["EndpointStatus"] != "InService":
            assert time.monotonic() < deadline, "endpoint not InService"
            time.sleep(0.1)

    def wait_copies(self, copies: int, timeout_s: float = 90.0) -> dict[str, Any]:
        """InService with `copies` copies serving (after a restart: the endpoint first)."""
        deadline = time.monotonic() + timeout_s
        while True:
            described: dict[str, Any] = self.sm.describe_inference_component(InferenceComponentName=COMPONENT)
            status = described["InferenceComponentStatus"]
            assert status != "Failed", described
            if status == "InService" and described["RuntimeConfig"]["CurrentCopyCount"] == copies:
                return described
            assert time.monotonic() < deadline, f"not {copies} copies InService in {timeout_s} s: {described}"
            time.sleep(0.1)

    def copies(self) -> list[Any]:
        owner = labels.owner_id(self.server.state_dir)
        return self.engine.containers.list(
            filters={"label": [f"{labels.COMPONENT}={COMPONENT}", f"{labels.OWNER}={owner}"]}
        )


def rolling_update(d: ComponentDeployment) -> Expected:
    d.gen += 1
    d.sm.update_inference_component(
        InferenceComponentName=COMPONENT,
        Specification=d.spec(),
        DeploymentConfig={
            "RollingUpdatePolicy": {
                "MaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1},
                "WaitIntervalInSeconds": 0,
            }
        },
    )
    described = d.wait_copies(2)
    assert described["Specification"]["ModelName"] == f"{COMPONENT}-g{d.gen}"
    return NOTHING


def _copies(d: ComponentDeployment, count: int) -> None:
    d.sm.update_inference_component_runtime_config(
        InferenceComponentName=COMPONENT, DesiredRuntimeConfig={"CopyCount": count}
    )
    d.wait_copies(count)


def copies_scaled(d: ComponentDeployment) -> Expected:
    for count in (3, 1, 2):
        _copies(d, count)
    return NOTHING


def scaled_to_zero(d: ComponentDeployment) -> Expected:
    _copies(d, 0)
    time.sleep(1.0)  # not a synchronisation: the load runs a second with no copy (the test counts it)
    _copies(d, 2)
    return Expected(errors={("ValidationError", 400): "no copy serves: SageMaker's no-capacity error"})


def _instances(d: ComponentDeployment, count: int) -> None:
    d.sm.update_endpoint_weights_and_capacities(
        EndpointName=ENDPOINT,
        DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": count}],
    )
    d.wait_endpoint()


def instances_changed(d: ComponentDeployment) -> Expected:
    """A third instance, then back to one (its copies, drained, are placed on the one left), then two."""
    for count in (3, 1, 2):
        _instances(d, count)
        d.wait_copies(2)
    return NOTHING


def copy_killed(d: ComponentDeployment) -> Expected:
    before = d.copies()
    victim = before[0]
    victim.kill()
    deadline = time.monotonic() + 90
    while True:
        running = {c.id for c in d.copies()}
        if len(running) >= len(before) and victim.id not in running:
            break
        assert time.monotonic() < deadline, "the killed copy was not replaced in 90 s"
        time.sleep(0.1)
    d.wait_copies(2)
    return Expected(
        errors={("ModelError", 424): "in flight on the killed copy"},
        unless=("no healthy instance is in rotation",),
    )


def _restart(d: ComponentDeployment, end: Callable[[], int]) -> Expected:
    end()
    d.server.start()
    d.wait_endpoint()
    d.wait_copies(2)
    return SERVER_DOWN


def serve_stopped(d: ComponentDeployment) -> Expected:
    return _restart(d, d.server.stop)


def serve_killed(d: ComponentDeployment) -> Expected:
    return _restart(d, d.server.kill)


def model_deleted(d: ComponentDeployment) -> Expected:
    """DeleteModel of the model the component serves: its copies serve on, as SageMaker's do."""
    d.sm.delete_model(ModelName=f"{COMPONENT}-g{d.gen}")
    return NOTHING


EVENTS: dict[str, Callable[[ComponentDeployment], Expected]] = {
    "rolling-update": rolling_update,
    "copies-scaled": copies_scaled,
    "scaled-to-zero": scaled_to_zero,
    "instances-changed": instances_changed,
    "copy-killed": copy_killed,
    "serve-sigterm": serve_stopped,
    "serve-sigkill": serve_killed,
    "model-deleted": model_deleted,
}


@pytest.fixture(scope="module")
def deployment(
    streamer_image: str, docker_engine: docker.DockerClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ComponentDeployment]:
    server = ServeProcess(tmp_path_factory.mktemp("component-lifecycles") / "state")
    track_owner(labels.owner_id(server.state_dir))
    server.start()
    made = ComponentDeployment(server, streamer_image, docker_engine)
    try:
        made.create()
        yield made
    finally:
        try:
            if not server.running():
                server.start()
            made.sm.delete_inference_component(InferenceComponentName=COMPONENT)
            deadline = time.monotonic() + 60
            while made.sm.list_inference_components()["InferenceComponents"]:
                assert time.monotonic() < deadline
                time.sleep(0.1)
            made.sm.delete_endpoint(EndpointName=ENDPOINT)
        finally:
            server.stop()
    assert made.copies() == []


@pytest.mark.parametrize("event", list(EVENTS))
def test_nothing_is_lost(event: str, deployment: ComponentDeployment) -> None:
    load = Load(deployment.server.url, invoke, 4, 0.02, id_prefix=f"{event}-").start()
    expected = NOTHING
    try:
        load.wait_sent(20)
        expected = EVENTS[event](deployment)
        load.wait_sent(20)
    finally:
        tally = load.stop(expected)
    assert tally.accounted == tally.sent, tally.row()
    assert tally.bad() == {}, (tally.row(), deployment.server.log_tail())
    assert tally.counts["ok"] >= 20, tally.row()
    if event == "scaled-to-zero":  # requests did meet the component at zero copies
        assert tally.counts["as_sagemaker"] > 0, tally.row()


def test_every_request_is_counted_by_a_test_that_can_fail(deployment: ComponentDeployment) -> None:
    """The accounting catches a loss: a load whose answers carry the wrong id is crossed."""

    def wrong(rt: Any, request_id: str) -> str | None:
        answered = invoke(rt, request_id)
        return None if answered is None else f"{answered}-other"

    load = Load(deployment.server.url, wrong, 2, 0.02, id_prefix="wrong-").start()
    try:
        load.wait_sent(5)
    finally:
        tally = load.stop(NOTHING)
    assert tally.counts["crossed"] == tally.sent > 0
