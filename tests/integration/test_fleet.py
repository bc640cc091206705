"""Fleet behaviour: weights and capacities, blue/green UpdateEndpoint, instance replacement."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import docker
import pytest
from botocore.config import Config

from emulator.runtime import labels
from emulator.runtime.labels import owner_id
from tests.fixtures.smlocal_server import CREDENTIALS, Smlocal, error_of, start_smlocal

pytestmark = pytest.mark.docker


def strict_runtime(smlocal: Smlocal) -> Any:
    """A runtime client that never retries: every failure the server answers is counted."""
    config = Config(retries={"mode": "standard", "max_attempts": 1})
    return boto3.client("sagemaker-runtime", endpoint_url=smlocal.server.url, config=config, **CREDENTIALS)


def settle(smlocal: Smlocal, name: str, timeout_s: float = 60.0) -> dict[str, Any]:
    """Poll DescribeEndpoint until the endpoint is neither Creating nor Updating."""
    deadline = time.monotonic() + timeout_s
    while True:
        described: dict[str, Any] = smlocal.sm.describe_endpoint(EndpointName=name)
        if described["EndpointStatus"] not in ("Creating", "Updating") or time.monotonic() > deadline:
            return described
        time.sleep(0.05)


class Client(threading.Thread):
    """Invokes continuously (bounded) until stopped; records answers and failures."""

    def __init__(self, smlocal: Smlocal, name: str, attrs: str, limit: int = 5000) -> None:
        super().__init__(daemon=True)
        self.rt = strict_runtime(smlocal)
        self.name_ = name
        self.attrs = attrs
        self.limit = limit
        self.stop = threading.Event()
        self.answers: list[str] = []
        self.failures: list[str] = []

    def run(self) -> None:
        for _ in range(self.limit):
            if self.stop.is_set():
                return
            try:
                reply = self.rt.invoke_endpoint(
                    EndpointName=self.name_, Body=b"x", CustomAttributes=self.attrs
                )
                self.answers.append(reply["Body"].read().decode().strip())
            except Exception as exc:  # noqa: BLE001 - every failure is what the test counts
                self.failures.append(repr(exc))

    def finish(self) -> None:
        self.stop.set()
        self.join(timeout=30)
        self.rt.close()


def two_variants(smlocal: Smlocal, name: str) -> None:
    smlocal.sm.create_model(ModelName=name, PrimaryContainer={"Image": smlocal.image})
    variants = [
        {"VariantName": v, "ModelName": name, "InitialInstanceCount": 1, "InstanceType": "ml.m5.large"}
        for v in ("A", "B")
    ]
    smlocal.sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=variants)
    smlocal.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    assert settle(smlocal, name)["EndpointStatus"] == "InService"


def variant(described: dict[str, Any], name: str) -> dict[str, Any]:
    return next(v for v in described["ProductionVariants"] if v["VariantName"] == name)


def test_weights_route_traffic(smlocal: Smlocal) -> None:
    two_variants(smlocal, "Weights")
    try:
        smlocal.sm.update_endpoint_weights_and_capacities(
            EndpointName="Weights",
            DesiredWeightsAndCapacities=[
                {"VariantName": "A", "DesiredWeight": 3.0},
                {"VariantName": "B", "DesiredWeight": 1.0},
            ],
        )
        described = settle(smlocal, "Weights")
        assert described["EndpointStatus"] == "InService"
        assert "FailureReason" not in described
        assert variant(described, "A")["CurrentWeight"] == 3.0
        assert variant(described, "A")["DesiredWeight"] == 3.0
        assert variant(described, "B")["CurrentWeight"] == 1.0
        counts: Counter[str] = Counter()
        n = 400
        for _ in range(n):
            counts[
                smlocal.rt.invoke_endpoint(EndpointName="Weights", Body=b"x")["InvokedProductionVariant"]
            ] += 1
        # Expected share of A: 0.75, sd ~0.022 at n=400; 0.1 is over 4.5 sd.
        assert abs(counts["A"] / n - 0.75) < 0.1, counts
        smlocal.sm.update_endpoint_weights_and_capacities(
            EndpointName="Weights", DesiredWeightsAndCapacities=[{"VariantName": "A", "DesiredWeight": 0.0}]
        )
        assert settle(smlocal, "Weights")["EndpointStatus"] == "InService"
        served = {
            smlocal.rt.invoke_endpoint(EndpointName="Weights", Body=b"x")["InvokedProductionVariant"]
            for _ in range(50)
        }
        assert served == {"B"}
    finally:
        smlocal.cleanup("Weights")


def test_update_refusals(smlocal: Smlocal) -> None:
    smlocal.deploy("Refusals")
    try:
        arn = smlocal.sm.describe_endpoint(EndpointName="Refusals")["EndpointArn"]
        with pytest.raises(smlocal.sm.exceptions.ClientError) as unknown:
            smlocal.sm.update_endpoint_weights_and_capacities(
                EndpointName="Refusals",
                DesiredWeightsAndCapacities=[{"VariantName": "Nope", "DesiredWeight": 1.0}],
            )
        assert error_of(unknown) == (
            "ValidationException",
            400,
            "The variant Nope does not exist in endpoint Refusals.",
        )
        with pytest.raises(smlocal.sm.exceptions.ClientError) as missing:
            smlocal.sm.update_endpoint(EndpointName="Refusals", EndpointConfigName="NoSuchConfig")
        assert "Could not find endpoint configuration" in error_of(missing)[2]
        smlocal.sm.update_endpoint_weights_and_capacities(
            EndpointName="Refusals",
            DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 2}],
        )
        described = smlocal.sm.describe_endpoint(EndpointName="Refusals")
        assert described["EndpointStatus"] == "Updating"
        assert described["ProductionVariants"][0]["DesiredInstanceCount"] == 2
        assert described["ProductionVariants"][0]["CurrentInstanceCount"] == 1
        for call in (
            lambda: smlocal.sm.update_endpoint(EndpointName="Refusals", EndpointConfigName="Refusals"),
            lambda: smlocal.sm.update_endpoint_weights_and_capacities(
                EndpointName="Refusals",
                DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredWeight": 2.0}],
            ),
        ):
            with pytest.raises(smlocal.sm.exceptions.ClientError) as busy:
                call()
            assert error_of(busy) == (
                "ValidationException",
                400,
                f'Cannot update in-progress endpoint "{arn}".',
            )
        assert settle(smlocal, "Refusals")["ProductionVariants"][0]["CurrentInstanceCount"] == 2
    finally:
        smlocal.cleanup("Refusals")


def test_scale_out_and_in_without_failures(smlocal: Smlocal) -> None:
    smlocal.deploy("Scale")
    client = Client(smlocal, "Scale", "env=CONTAINER_ID")
    client.start()
    try:
        smlocal.sm.update_endpoint_weights_and_capacities(
            EndpointName="Scale",
            DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 2}],
        )
        described = settle(smlocal, "Scale")
        assert described["EndpointStatus"] == "InService", described
        assert described["ProductionVariants"][0]["CurrentInstanceCount"] == 2
        rt = strict_runtime(smlocal)
        hosts = {
            rt.invoke_endpoint(EndpointName="Scale", Body=b"x", CustomAttributes="env=CONTAINER_ID")[
                "Body"
            ].read()
            for _ in range(20)
        }
        rt.close()
        assert len(hosts) == 2, hosts
        smlocal.sm.update_endpoint_weights_and_capacities(
            EndpointName="Scale",
            DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 1}],
        )
        described = settle(smlocal, "Scale")
        assert described["EndpointStatus"] == "InService"
        assert described["ProductionVariants"][0]["CurrentInstanceCount"] == 1
        assert described["ProductionVariants"][0]["DesiredInstanceCount"] == 1
    finally:
        client.finish()
        smlocal.cleanup("Scale")
    assert client.failures == []
    assert len(set(client.answers)) >= 2


def model_and_config(smlocal: Smlocal, name: str, env: dict[str, str]) -> None:
    smlocal.sm.create_model(ModelName=name, PrimaryContainer={"Image": smlocal.image, "Environment": env})
    smlocal.sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "InitialInstanceCount": 1,
                "InstanceType": "ml.m5.large",
            }
        ],
    )


def drop(smlocal: Smlocal, name: str) -> None:
    for call, key in (
        (smlocal.sm.delete_endpoint_config, "EndpointConfigName"),
        (smlocal.sm.delete_model, "ModelName"),
    ):
        try:
            call(**{key: name})
        except smlocal.sm.exceptions.ClientError:
            pass


def endpoint_containers(smlocal: Smlocal, name: str) -> list[Any]:
    """Running containers of one endpoint of this test's server (never another server's)."""
    wanted = [f"{labels.ENDPOINT}={name}", f"{labels.OWNER}={owner_id(smlocal.state_dir)}"]
    return list(docker.from_env().containers.list(filters={"label": wanted}))


def test_blue_green_update_without_failed_requests(smlocal: Smlocal) -> None:
    smlocal.deploy("BlueGreen", env={"NAME": "blue"})
    model_and_config(smlocal, "BlueGreen-green", {"NAME": "green"})
    client = Client(smlocal, "BlueGreen", "env=NAME")
    client.start()
    try:
        deadline = time.monotonic() + 10
        while not client.answers and time.monotonic() < deadline:
            time.sleep(0.01)
        smlocal.sm.update_endpoint(EndpointName="BlueGreen", EndpointConfigName="BlueGreen-green")
        assert smlocal.sm.describe_endpoint(EndpointName="BlueGreen")["EndpointStatus"] == "Updating"
        described = settle(smlocal, "BlueGreen")
        assert described["EndpointStatus"] == "InService", described
        assert described["EndpointConfigName"] == "BlueGreen-green"
        assert "FailureReason" not in described
        seen = len(client.answers)
        deadline = time.monotonic() + 10
        while len(client.answers) < seen + 5 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        client.finish()
        smlocal.cleanup("BlueGreen")
        drop(smlocal, "BlueGreen-green")
    assert client.failures == []
    assert client.answers[0] == "blue"
    assert client.answers[-1] == "green"
    assert "blue" not in client.answers[client.answers.index("green") :]  # one atomic switch
    print(f"blue/green: {len(client.answers)} requests, {len(client.failures)} failed")


def test_failed_update_keeps_the_old_fleet(smlocal: Smlocal) -> None:
    smlocal.deploy("BadUpdate", env={"NAME": "old"})
    model_and_config(smlocal, "BadUpdate-new", {"EXIT_AT_START": "3"})
    try:
        smlocal.sm.update_endpoint(EndpointName="BadUpdate", EndpointConfigName="BadUpdate-new")
        described = settle(smlocal, "BadUpdate")
        assert described["EndpointStatus"] == "InService"
        assert described["EndpointConfigName"] == "BadUpdate"
        assert described["FailureReason"].startswith("CannotStartContainerError.")
        reply = smlocal.rt.invoke_endpoint(EndpointName="BadUpdate", Body=b"x", CustomAttributes="env=NAME")
        assert reply["Body"].read() == b"old"
        assert len(endpoint_containers(smlocal, "BadUpdate")) == 1  # the new fleet's container is gone
    finally:
        smlocal.cleanup("BadUpdate")
        drop(smlocal, "BadUpdate-new")


def test_restart_mid_update_leaves_no_orphans(tmp_path: Path, echo_image: str, aws_credentials: None) -> None:
    engine = docker.from_env()
    crashed = start_smlocal(tmp_path, echo_image, stop_containers=False)
    try:
        crashed.deploy("Mid", env={"NAME": "old"})
        old = [c.id for c in endpoint_containers(crashed, "Mid")]
        crashed.sm.create_model(
            ModelName="Mid-new",
            PrimaryContainer={"Image": echo_image, "Environment": {"NAME": "new", "LISTEN_DELAY_S": "30"}},
        )
        crashed.sm.create_endpoint_config(
            EndpointConfigName="Mid-new",
            ProductionVariants=[
                {
                    "VariantName": "Green",
                    "ModelName": "Mid-new",
                    "InitialInstanceCount": 1,
                    "InstanceType": "ml.m5.large",
                }
            ],
        )
        crashed.sm.update_endpoint(EndpointName="Mid", EndpointConfigName="Mid-new")
        deadline = time.monotonic() + 20
        while len(endpoint_containers(crashed, "Mid")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(endpoint_containers(crashed, "Mid")) == 2
    finally:
        crashed.server.stop()
    # What a killed server leaves behind: the new fleet's container, still running.
    leftover = engine.containers.run(
        echo_image,
        ["serve"],
        detach=True,
        labels={
            labels.MANAGED: "true",
            labels.OWNER: owner_id(tmp_path),
            labels.ENDPOINT: "Mid",
            labels.VARIANT: "Green",
        },
    )
    restarted = start_smlocal(tmp_path, echo_image)
    try:
        described = restarted.wait("Mid")
        assert described["EndpointStatus"] == "InService"
        assert described["EndpointConfigName"] == "Mid"
        assert [c.id for c in endpoint_containers(restarted, "Mid")] == old  # adopted; the rest removed
        reply = restarted.rt.invoke_endpoint(EndpointName="Mid", Body=b"x", CustomAttributes="env=NAME")
        assert reply["Body"].read() == b"old"
        restarted.cleanup("Mid")
        drop(restarted, "Mid-new")
    finally:
        restarted.server.stop()
        try:
            leftover.remove(force=True)
        except docker.errors.NotFound:
            pass
    engine.close()


def test_killed_instance_is_replaced(smlocal: Smlocal) -> None:
    smlocal.deploy("Heal", count=2)
    before = {c.id: c for c in endpoint_containers(smlocal, "Heal")}
    assert len(before) == 2
    client = Client(smlocal, "Heal", "env=CONTAINER_ID")
    client.start()
    try:
        deadline = time.monotonic() + 10
        while len(client.answers) < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        victim = next(iter(before.values()))
        killed_at = time.monotonic()
        victim.kill()
        replaced_s = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            described = smlocal.sm.describe_endpoint(EndpointName="Heal")
            assert described["EndpointStatus"] == "InService"
            running = {c.id for c in endpoint_containers(smlocal, "Heal")}
            if (
                described["ProductionVariants"][0]["CurrentInstanceCount"] == 2
                and len(running - set(before)) == 1
            ):
                replaced_s = time.monotonic() - killed_at
                break
            time.sleep(0.05)
        assert replaced_s is not None, "the killed instance was not replaced"
        seen = len(client.answers)
        deadline = time.monotonic() + 10
        while len(client.answers) < seen + 20 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        client.finish()
        smlocal.cleanup("Heal")
    # A sequential client has at most one request in flight on the killed instance.
    assert len(client.failures) <= 1, "\n".join(client.failures)
    assert all("ModelError" in f for f in client.failures)
    assert len(set(client.answers)) == 3  # two first instances, then the replacement
    print(f"replaced a killed instance in {replaced_s:.2f} s; {len(client.failures)} failed request(s)")


def test_instance_failing_its_pings_is_replaced(smlocal: Smlocal) -> None:
    service = smlocal.server.service
    assert service is not None
    interval = service.health_check_interval_s
    service.health_check_interval_s = 0.5  # read when the endpoint's watch starts
    try:
        smlocal.deploy("Frozen", count=2)
    finally:
        service.health_check_interval_s = interval
    before = {c.id: c for c in endpoint_containers(smlocal, "Frozen")}
    victim = next(iter(before.values()))
    try:
        victim.pause()  # alive, but answers no /ping
        paused_at = time.monotonic()
        deadline = time.monotonic() + 30
        replaced_s = None
        while time.monotonic() < deadline:
            described = smlocal.sm.describe_endpoint(EndpointName="Frozen")
            assert described["EndpointStatus"] == "InService"
            running = {c.id for c in endpoint_containers(smlocal, "Frozen")}
            if described["ProductionVariants"][0]["CurrentInstanceCount"] == 2 and victim.id not in running:
                replaced_s = time.monotonic() - paused_at
                break
            time.sleep(0.05)
        assert replaced_s is not None, "the frozen instance was not replaced"
        for _ in range(10):
            assert smlocal.rt.invoke_endpoint(EndpointName="Frozen", Body=b"ok")["Body"].read() == b"ok"
        print(f"replaced a frozen instance in {replaced_s:.2f} s (ping interval 0.5 s, attempt timeout 2 s)")
    finally:
        smlocal.cleanup("Frozen")
        try:
            victim.reload()
            if victim.status == "paused":
                victim.unpause()
            victim.remove(force=True)
        except docker.errors.NotFound:
            pass
