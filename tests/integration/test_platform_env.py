"""What the platform gives a model container besides its Environment (emulator/model/platform_env.py),
seen from inside the container: a single-container endpoint's SAGEMAKER_SAFE_PORT_RANGE and hostname
model.aws.local, as a real endpoint's environment dump shows (pytorch/serve#631), and no
SAGEMAKER_BIND_TO_PORT; the contract tester's containers get the same. A multi-container instance's
ports and hostname: test_multi_container_instances.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import docker
import pytest

from contract_tests.check_config import CheckConfig
from contract_tests.target import Target
from emulator.runtime import labels
from tests.fixtures.smlocal_server import Smlocal
from tests.fixtures.twins import FAST_LIMITS

pytestmark = pytest.mark.docker

#: The container's hostname and environment, as a process inside it sees them.
INSIDE = "import json, os, socket; print(json.dumps([socket.gethostname(), dict(os.environ)]))"


def inside(container: Any) -> tuple[str, dict[str, str]]:
    result = container.exec_run(["python3", "-c", INSIDE])
    assert result.exit_code == 0, result.output
    hostname, env = json.loads(result.output)
    return hostname, env


def test_a_single_container_endpoint_gets_the_platforms_range_and_hostname(
    smlocal: Smlocal, docker_engine: docker.DockerClient
) -> None:
    # the platform's value wins over the model's Environment, as SAGEMAKER_MULTI_MODEL does
    described = smlocal.deploy("pe-single", env={"WHO": "me", "SAGEMAKER_SAFE_PORT_RANGE": "1-2"})
    try:
        assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        (container,) = docker_engine.containers.list(filters={"label": f"{labels.ENDPOINT}=pe-single"})
        hostname, env = inside(container)
        assert (hostname, env["HOSTNAME"]) == ("model.aws.local", "model.aws.local")
        assert (env["WHO"], env["SAGEMAKER_SAFE_PORT_RANGE"]) == ("me", "21000-21999")
        assert "SAGEMAKER_BIND_TO_PORT" not in env  # one container listens on 8080, told nothing
        answer = smlocal.rt.invoke_endpoint(
            EndpointName="pe-single", Body=b"", CustomAttributes="env=SAGEMAKER_SAFE_PORT_RANGE"
        )
        assert answer["Body"].read() == b"21000-21999"
    finally:
        smlocal.cleanup("pe-single")


def test_the_contract_testers_containers_get_the_same(
    echo_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    config = CheckConfig(image=echo_image, environment={"WHO": "me"}, limits=FAST_LIMITS, cache_dir=tmp_path)
    target = Target(config)
    try:
        hostname, env = inside(docker_engine.containers.get(target.start().handle.id))
        assert (hostname, env["HOSTNAME"]) == ("model.aws.local", "model.aws.local")
        assert (env["WHO"], env["SAGEMAKER_SAFE_PORT_RANGE"]) == ("me", "21000-21999")
        assert "SAGEMAKER_BIND_TO_PORT" not in env
    finally:
        target.close()
