"""Every deployment path ends a failed update InService on the old fleet with a FailureReason, with
health monitoring back on and no container of the new fleet left behind (issue 9, point 4): UpdateEndpoint
all at once, canary, linear and rolling, each with a new model whose image is gone, whose model data is
gone, and whose container exits; and a failed UpdateEndpointWeightsAndCapacities scale-out. Real echo
containers, boto3 against the real server (--time-scale 60)."""

from __future__ import annotations

import io
import shutil
import tarfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest

from emulator.model import messages
from emulator.runtime import labels
from tests.fixtures.scaling import time_scaled_server, wait_for
from tests.fixtures.smlocal_server import Smlocal

pytestmark = pytest.mark.docker

DEPLOYMENTS: dict[str, dict[str, Any] | None] = {
    "all-at-once": None,
    "canary": {
        "BlueGreenUpdatePolicy": {
            "TrafficRoutingConfiguration": {
                "Type": "CANARY",
                "WaitIntervalInSeconds": 60,
                "CanarySize": {"Type": "INSTANCE_COUNT", "Value": 1},
            },
            "TerminationWaitInSeconds": 60,
        }
    },
    "linear": {
        "BlueGreenUpdatePolicy": {
            "TrafficRoutingConfiguration": {
                "Type": "LINEAR",
                "WaitIntervalInSeconds": 60,
                "LinearStepSize": {"Type": "CAPACITY_PERCENT", "Value": 50},
            }
        }
    },
    "rolling": {
        "RollingUpdatePolicy": {
            "MaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 1},
            "WaitIntervalInSeconds": 0,
        }
    },
}


@pytest.fixture(scope="module")
def smlocal(
    tmp_path_factory: pytest.TempPathFactory, echo_image: str, s3_server: str, aws_credentials: None
) -> Iterator[Smlocal]:
    yield from time_scaled_server(tmp_path_factory.mktemp("smlocal"), echo_image, s3_server)


def _targz(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _config(smlocal: Smlocal, name: str, container: dict[str, Any], count: int = 2) -> str:
    smlocal.sm.create_model(ModelName=name, PrimaryContainer=container)
    smlocal.sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "InitialInstanceCount": count,
                "InstanceType": "ml.m5.large",
            }
        ],
    )
    return name


@dataclass(frozen=True)
class Seen:
    """One container as the engine's list call shows it (no inspect per container: none can race a
    removal under way)."""

    id: str
    status: str
    mounts: dict[str, str]  # destination -> host source


def _containers(client: docker.DockerClient, smlocal: Smlocal, endpoint: str) -> list[Seen]:
    owner = labels.owner_id(smlocal.state_dir)
    found = client.api.containers(
        all=True, filters={"label": [f"{labels.OWNER}={owner}", f"{labels.ENDPOINT}={endpoint}"]}
    )
    return [
        Seen(c["Id"], c["State"], {m["Destination"]: m["Source"] for m in c.get("Mounts") or []})
        for c in found
    ]


def _settled(smlocal: Smlocal, name: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        described: dict[str, Any] = smlocal.sm.describe_endpoint(EndpointName=name)
        return None if described["EndpointStatus"] in ("Updating", "RollingBack") else described

    result: dict[str, Any] = wait_for(f"{name} to settle", done, 60)
    return result


def _failing_models(
    smlocal: Smlocal, client: docker.DockerClient, s3: Any, bucket: str, prefix: str
) -> list[tuple[str, str]]:
    """(endpoint config, the FailureReason's start) for each way a new model can fail."""
    # An image that CreateModel found, untagged before the update (the echo image itself stays).
    gone_tag = f"smlocal-test-c/vanishing:{uuid.uuid4().hex[:12]}"
    client.images.get(smlocal.image).tag(gone_tag)
    gone_image = _config(smlocal, f"{prefix}-noimage", {"Image": gone_tag})
    client.images.remove(gone_tag)
    # Model data that CreateModel found, deleted before the update.
    key = f"{prefix}/model.tar.gz"
    s3.put_object(Bucket=bucket, Key=key, Body=_targz({"weights": b"1"}))
    url = f"s3://{bucket}/{key}"
    gone_data = _config(smlocal, f"{prefix}-nodata", {"Image": smlocal.image, "ModelDataUrl": url})
    s3.delete_object(Bucket=bucket, Key=key)
    exits = _config(
        smlocal, f"{prefix}-exits", {"Image": smlocal.image, "Environment": {"EXIT_AT_START": "3"}}
    )
    return [
        (gone_image, messages.image_not_found(gone_tag)),
        (gone_data, f'Failed to download model data for container from URL "{url}"'),
        (exits, "CannotStartContainerError."),
    ]


def _assert_watched(smlocal: Smlocal, client: docker.DockerClient, name: str) -> None:
    """Health monitoring is on: a killed instance is replaced."""
    victim = _containers(client, smlocal, name)[0]
    client.containers.get(victim.id).kill()
    wait_for(
        "the killed instance to be replaced",
        lambda: (
            victim.id not in {c.id for c in _containers(client, smlocal, name) if c.status == "running"}
            and smlocal.sm.describe_endpoint(EndpointName=name)["ProductionVariants"][0][
                "CurrentInstanceCount"
            ]
            == 2
        ),
        60,
    )


@pytest.mark.parametrize("path", list(DEPLOYMENTS))
def test_a_failed_update_leaves_the_old_fleet_serving_and_watched(
    smlocal: Smlocal, path: str, s3_client: Any, s3_bucket: str
) -> None:
    client = docker.from_env()
    name = f"Fail-{path}"
    blue = _config(smlocal, f"{name}-blue", {"Image": smlocal.image, "Environment": {"COLOR": "blue"}})
    smlocal.sm.create_endpoint(EndpointName=name, EndpointConfigName=blue)
    configs = [blue]
    try:
        assert smlocal.wait(name)["EndpointStatus"] == "InService"
        before = {c.id for c in _containers(client, smlocal, name)}
        failing = _failing_models(smlocal, client, s3_client, s3_bucket, name)
        configs += [c for c, _ in failing]
        deployment = DEPLOYMENTS[path]
        for config_name, reason in failing:
            update: dict[str, Any] = {"EndpointName": name, "EndpointConfigName": config_name}
            if deployment is not None:
                update["DeploymentConfig"] = deployment
            smlocal.sm.update_endpoint(**update)
            done = _settled(smlocal, name)
            assert done["EndpointStatus"] == "InService", (config_name, done)
            assert done["EndpointConfigName"] == blue
            assert "PendingDeploymentSummary" not in done
            if path == "rolling" and config_name.endswith("-exits"):
                reason = f"The update was rolled back because a new instance of variant AllTraffic failed: {reason}"
            assert done["FailureReason"].startswith(reason), (config_name, done["FailureReason"])
            assert done["ProductionVariants"][0]["CurrentInstanceCount"] == 2
            body = smlocal.rt.invoke_endpoint(EndpointName=name, Body=b"x", CustomAttributes="env=COLOR")
            assert body["Body"].read() == b"blue"
            # nothing of the new fleet is left (the rolling rollback may have replaced old instances)
            running = [c for c in _containers(client, smlocal, name)]
            assert len(running) == 2, [c.name for c in running]
            if path != "rolling":
                assert {c.id for c in running} == before
        _assert_watched(smlocal, client, name)
        smlocal.sm.delete_endpoint(EndpointName=name)  # accepted: the endpoint is not stuck
        assert smlocal.server.service is not None
        smlocal.server.call(smlocal.server.service.wait_idle(), timeout_s=60)
        assert _containers(client, smlocal, name) == []
    finally:
        for c in configs:
            smlocal.cleanup(c)
        smlocal.cleanup(name)
        client.close()


def test_a_failed_scale_out_keeps_the_previous_desired_count(
    smlocal: Smlocal, s3_client: Any, s3_bucket: str
) -> None:
    """The new instances cannot start (their model data's folder is gone from the host): the variant
    keeps its count, DesiredInstanceCount is not the failed one, and a restart would not re-launch it."""
    client = docker.from_env()
    name = "ScaleFail"
    s3_client.put_object(Bucket=s3_bucket, Key="scale/model.tar.gz", Body=_targz({"weights": b"1"}))
    url = f"s3://{s3_bucket}/scale/model.tar.gz"
    _config(smlocal, name, {"Image": smlocal.image, "ModelDataUrl": url}, count=1)
    smlocal.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    try:
        assert smlocal.wait(name)["EndpointStatus"] == "InService"
        (container,) = _containers(client, smlocal, name)
        source = Path(container.mounts["/opt/ml/model"])
        shutil.rmtree(source)  # the plan's folder: a new container's bind mount now fails
        smlocal.sm.update_endpoint_weights_and_capacities(
            EndpointName=name,
            DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 3}],
        )
        done = _settled(smlocal, name)
        assert done["EndpointStatus"] == "InService"
        assert "FailureReason" in done
        variant = done["ProductionVariants"][0]
        assert (variant["CurrentInstanceCount"], variant["DesiredInstanceCount"]) == (1, 1)
        assert smlocal.server.service is not None
        endpoint = smlocal.server.service.endpoints.get(name)
        assert endpoint is not None
        assert all(c in (None, 1) for n, _, c in endpoint.variant_overrides)  # what a restart re-launches
        assert [c.id for c in _containers(client, smlocal, name)] == [container.id]
    finally:
        smlocal.cleanup(name)
        client.close()


def test_update_rollback_failed_keeps_the_mixed_fleet_watched(
    smlocal: Smlocal, s3_client: Any, s3_bucket: str
) -> None:
    """A rolling update times out after its first batch and the rollback cannot start an old
    instance (the old model's folder is gone from the host): UpdateRollbackFailed, the mixed fleet
    serves, its instances are still watched (a killed one leaves rotation), and it can be deleted."""
    client = docker.from_env()
    name = "RollbackFails"
    s3_client.put_object(Bucket=s3_bucket, Key="rbf/model.tar.gz", Body=_targz({"weights": b"1"}))
    blue = _config(
        smlocal,
        f"{name}-blue",
        {
            "Image": smlocal.image,
            "Environment": {"COLOR": "blue"},
            "ModelDataUrl": f"s3://{s3_bucket}/rbf/model.tar.gz",
        },
    )
    green = _config(smlocal, f"{name}-green", {"Image": smlocal.image, "Environment": {"COLOR": "green"}})
    smlocal.sm.create_endpoint(EndpointName=name, EndpointConfigName=blue)
    try:
        assert smlocal.wait(name)["EndpointStatus"] == "InService"
        old = _containers(client, smlocal, name)[0]
        source = old.mounts["/opt/ml/model"]
        shutil.rmtree(source)  # the old plan can no longer start an instance
        smlocal.sm.update_endpoint(
            EndpointName=name,
            EndpointConfigName=green,
            DeploymentConfig={
                "RollingUpdatePolicy": {
                    "MaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 1},
                    "WaitIntervalInSeconds": 3600,  # 60 s at --time-scale 60: past the timeout
                    "MaximumExecutionTimeoutInSeconds": 600,  # 10 s
                }
            },
        )
        done = _settled(smlocal, name)
        assert done["EndpointStatus"] == "UpdateRollbackFailed", done
        assert "the rollback failed too" in done["FailureReason"]
        assert done["ProductionVariants"][0]["CurrentInstanceCount"] == 2
        colors = {
            smlocal.rt.invoke_endpoint(EndpointName=name, Body=b"x", CustomAttributes="env=COLOR")[
                "Body"
            ].read()
            for _ in range(20)
        }
        assert colors <= {b"blue", b"green"} and colors
        client.containers.get(_containers(client, smlocal, name)[0].id).kill()
        wait_for(
            "the killed instance to leave rotation",
            lambda: (
                smlocal.sm.describe_endpoint(EndpointName=name)["ProductionVariants"][0][
                    "CurrentInstanceCount"
                ]
                == 1
            ),
            20,
        )
        smlocal.sm.delete_endpoint(EndpointName=name)
        assert smlocal.server.service is not None
        smlocal.server.call(smlocal.server.service.wait_idle(), timeout_s=60)
        assert _containers(client, smlocal, name) == []
    finally:
        smlocal.cleanup(name)
        smlocal.cleanup(blue)
        smlocal.cleanup(green)
        client.close()


def test_a_variant_that_fails_takes_the_healthy_variants_down_with_it(smlocal: Smlocal) -> None:
    """Two variants, one never healthy (/ping answers 500 until the startup timeout): CreateEndpoint
    ends Failed and a blue/green UpdateEndpoint ends InService on the old fleet, and in both the
    healthy variant's new containers are stopped too, not left running unowned."""
    client = docker.from_env()
    name = "TwoVariants"
    pair = f"{name}-pair"
    smlocal.sm.create_model(ModelName=f"{name}-good", PrimaryContainer={"Image": smlocal.image})
    smlocal.sm.create_model(
        ModelName=f"{name}-bad",
        PrimaryContainer={"Image": smlocal.image, "Environment": {"PING_STATUS": "500"}},
    )
    smlocal.sm.create_endpoint_config(
        EndpointConfigName=pair,
        ProductionVariants=[
            {"VariantName": "Good", "ModelName": f"{name}-good", "InitialInstanceCount": 1},
            {"VariantName": "Bad", "ModelName": f"{name}-bad", "InitialInstanceCount": 1},
        ],
    )
    single = _config(smlocal, f"{name}-single", {"Image": smlocal.image})
    try:
        smlocal.sm.create_endpoint(EndpointName=name, EndpointConfigName=pair)
        failed = smlocal.wait(name)
        assert failed["EndpointStatus"] == "Failed"
        assert failed["FailureReason"] == messages.ping_health_check_failed("Bad")
        assert _containers(client, smlocal, name) == []
        smlocal.cleanup(name)

        smlocal.sm.create_endpoint(EndpointName=name, EndpointConfigName=single)
        assert smlocal.wait(name)["EndpointStatus"] == "InService"
        before = {c.id for c in _containers(client, smlocal, name)}
        smlocal.sm.update_endpoint(EndpointName=name, EndpointConfigName=pair)
        done = _settled(smlocal, name)
        assert done["EndpointStatus"] == "InService" and done["EndpointConfigName"] == single
        assert done["FailureReason"] == messages.ping_health_check_failed("Bad")
        assert {c.id for c in _containers(client, smlocal, name)} == before
    finally:
        smlocal.cleanup(name)
        smlocal.cleanup(single)
        smlocal.cleanup(pair)
        for model in (f"{name}-good", f"{name}-bad"):
            try:
                smlocal.sm.delete_model(ModelName=model)
            except smlocal.sm.exceptions.ClientError:
                pass
        client.close()
